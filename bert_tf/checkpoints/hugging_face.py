"""Hugging Face BERT checkpoints (`BertModel` / `BertForPreTraining`).

Reads and writes the safetensors layout (`model.safetensors`, optionally
sharded with `model.safetensors.index.json`) plus `config.json`. PyTorch
pickles (`pytorch_model.bin`) are read only through
`torch.load(weights_only=True)`, which refuses to run code, and only when
torch is installed; safetensors (a core dependency) needs neither.

PyTorch stores dense kernels as [out, in]; Keras as [in, out].
"""

import io
import json
import os
import re

import numpy as np
from safetensors.numpy import load, load_file, save, save_file

from bert_tf import storage
from bert_tf.checkpoints import weight_map
from bert_tf.checkpoints.json_file import read_json_object
from bert_tf.models.encoder_config import EncoderConfig
from bert_tf.optional_imports import import_optional

CONFIG_NAME = "config.json"
SAFETENSORS_NAME = "model.safetensors"
SAFETENSORS_INDEX_NAME = "model.safetensors.index.json"
PYTORCH_NAME = "pytorch_model.bin"
VOCAB_NAME = "vocab.txt"

_ENCODER_PREFIX = "bert."


def hf_name(canonical_name):
    """Hugging Face key of a canonical (Google TF1) weight name, without `bert.`."""
    special = {
        "cls/predictions/output_bias": "cls.predictions.bias",
        "cls/seq_relationship/output_weights": "cls.seq_relationship.weight",
        "cls/seq_relationship/output_bias": "cls.seq_relationship.bias",
    }
    if canonical_name in special:
        return special[canonical_name]
    name = canonical_name
    if name.startswith("bert/"):
        name = name[len("bert/"):]
    name = re.sub(r"layer_(\d+)", r"layer.\1", name)
    name = name.replace("/", ".")
    if name.endswith("_embeddings"):
        return name + ".weight"
    for ours, theirs in ((".kernel", ".weight"), (".gamma", ".weight"), (".beta", ".bias")):
        if name.endswith(ours):
            return name[: -len(ours)] + theirs
    return name


def _normalise_key(key):
    """Strips the `bert.` prefix and maps old LayerNorm names (gamma/beta)."""
    if key.startswith(_ENCODER_PREFIX):
        key = key[len(_ENCODER_PREFIX):]
    if key.endswith("LayerNorm.gamma"):
        key = key[: -len("gamma")] + "weight"
    elif key.endswith("LayerNorm.beta"):
        key = key[: -len("beta")] + "bias"
    return key


def _to_ours(value, kind):
    if kind in (weight_map.KERNEL, weight_map.TRANSPOSED_KERNEL):
        return np.ascontiguousarray(value.T)
    return value


def weights_file(path):
    """The weights file (or shard index) of a HF directory or file path."""
    if storage.isfile(path):
        return path
    if not storage.isdir(path):
        raise FileNotFoundError(f"Hugging Face checkpoint not found: {path}")
    for name in (SAFETENSORS_NAME, SAFETENSORS_INDEX_NAME, PYTORCH_NAME):
        candidate = os.path.join(path, name)
        if storage.isfile(candidate):
            return candidate
    raise FileNotFoundError(
        f"{path}: no {SAFETENSORS_NAME}, {SAFETENSORS_INDEX_NAME} or {PYTORCH_NAME} found")


def read_state_dict(path):
    """All tensors of a HF checkpoint as numpy arrays, keys normalised."""
    path = weights_file(path)
    if path.endswith(".safetensors"):
        raw = _read_safetensors(path)
    elif path.endswith(SAFETENSORS_INDEX_NAME):
        index = read_json_object(path)
        if not isinstance(index.get("weight_map"), dict):
            raise ValueError(f"{path}: no 'weight_map' object in the shard index")
        shards = sorted(set(index["weight_map"].values()))
        raw = {}
        for shard in shards:
            raw.update(_read_safetensors(os.path.join(os.path.dirname(path), shard)))
    elif path.endswith(".bin") or path.endswith(".pt"):
        raw = _read_pytorch_pickle(path)
    else:
        raise ValueError(
            f"{path}: unknown Hugging Face weights format; expected .safetensors or .bin")
    return {_normalise_key(key): value for key, value in raw.items()}


def _read_safetensors(path):
    try:
        if storage.has_scheme(path):  # safetensors reads local files only
            return load(storage.read_bytes(path))
        return load_file(path)
    except Exception as e:  # safetensors raises its own error types
        raise ValueError(f"{path}: not a readable safetensors file ({e})") from e


def _read_pytorch_pickle(path):
    torch = import_optional(
        "torch", "torch", f"reading the PyTorch pickle {path} safely "
        "(torch.load(weights_only=True); or convert it to model.safetensors)")
    try:
        # torch.load opens local paths only; object storage is read into memory.
        source = io.BytesIO(storage.read_bytes(path)) if storage.has_scheme(path) else path
        state = torch.load(source, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises pickle's and its own error types
        raise ValueError(f"{path}: not a readable PyTorch checkpoint ({e})") from e
    return {key: value.float().numpy() for key, value in state.items()}


def read_config(path):
    """`EncoderConfig` from the `config.json` beside a HF checkpoint."""
    directory = path if storage.isdir(path) else os.path.dirname(path)
    config_path = os.path.join(directory, CONFIG_NAME)
    values = read_json_object(config_path, "a Hugging Face checkpoint ships config.json")
    position_type = values.get("position_embedding_type", "absolute")
    if position_type != "absolute":
        raise ValueError(
            f"{config_path}: position_embedding_type {position_type!r} is not "
            "supported; BERT uses 'absolute'")
    return EncoderConfig.from_bert_config(values, source=config_path)


def arrays_for_slots(state_dict, slots):
    """Arrays in our layout for every slot whose HF key is in `state_dict`."""
    arrays = {}
    for slot in slots:
        key = hf_name(slot.name)
        if key in state_dict:
            arrays[slot.name] = _to_ours(np.asarray(state_dict[key]), slot.kind)
    return arrays


# bert_tf's own name for the tanh GELU, which transformers does not know, and the
# name transformers gives the same function (google-research/bert's formula).
_HF_ACTIVATION_NAMES = {"gelu_tanh": "gelu_new"}


def hf_activation_name(hidden_act: str) -> str:
    """The `hidden_act` of a Hugging Face config for bert_tf's `hidden_act`.

    Args:
      hidden_act: an `EncoderConfig.hidden_act` ("gelu" is the exact GELU in
        both; the other names are Hugging Face's already).
    """
    return _HF_ACTIVATION_NAMES.get(hidden_act, hidden_act)


def write(model, directory, vocab_file=None, lower_case=None):
    """Writes `model` as a HF safetensors checkpoint with `config.json`.

    An encoder is written as `BertModel`; a pretrainer as
    `BertForPreTraining` (encoder keys prefixed with `bert.`).
    """
    storage.makedirs(directory, exist_ok=True)
    slots = weight_map.model_slots(model)
    is_pretrainer = hasattr(model, "masked_lm_head")
    tensors = {}
    for slot in slots:
        key = hf_name(slot.name)
        if is_pretrainer and not key.startswith("cls."):
            key = _ENCODER_PREFIX + key
        value = np.asarray(slot.variable.numpy())
        if slot.kind in (weight_map.KERNEL, weight_map.TRANSPOSED_KERNEL):
            value = value.T
        tensors[key] = np.ascontiguousarray(value)
    weights_path = os.path.join(directory, SAFETENSORS_NAME)
    if storage.has_scheme(weights_path):  # safetensors writes local files only
        with storage.atomic_write(weights_path, "wb") as f:
            f.write(save(tensors, metadata={"format": "pt"}))
    else:
        save_file(tensors, weights_path, metadata={"format": "pt"})
    config = getattr(model, "encoder", model).encoder_config
    values = {
        "architectures": ["BertForPreTraining" if is_pretrainer else "BertModel"],
        "model_type": "bert",
        "position_embedding_type": "absolute",
        **config.to_bert_config(),
        "hidden_act": hf_activation_name(config.hidden_act),
    }
    with storage.open(os.path.join(directory, CONFIG_NAME), "w", encoding="utf-8") as f:
        json.dump(values, f, indent=2)
    if vocab_file:
        storage.copy(vocab_file, os.path.join(directory, VOCAB_NAME))
        if lower_case is not None:
            with storage.open(os.path.join(directory, "tokenizer_config.json"), "w",
                      encoding="utf-8") as f:
                json.dump({"do_lower_case": bool(lower_case),
                           "tokenizer_class": "BertTokenizer"}, f, indent=2)
    return directory


def read_lower_case(directory):
    """`do_lower_case` from `tokenizer_config.json`, or None when absent."""
    path = os.path.join(directory, "tokenizer_config.json")
    if not storage.isfile(path):
        return None
    return read_json_object(path).get("do_lower_case")
