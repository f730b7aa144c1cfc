"""Google TF1 checkpoints (google-research/bert): read and write.

Layout: `bert_model.ckpt.{index,data-*}` with variables named
`bert/embeddings/...`, `bert/encoder/layer_N/...`, `bert/pooler/...` and the
pretraining heads under `cls/...`, next to `bert_config.json` and `vocab.txt`.

In this format `"hidden_act": "gelu"` means the tanh approximation (that is
what google-research/bert's `modeling.gelu` computes). A model with the exact
erf GELU is written with `"hidden_act": "gelu"` too, the closest name that
code accepts, plus `"bert_tf_hidden_act": "gelu"`, which this importer honours.
"""

import json
import os

import numpy as np
import tensorflow as tf

from bert_tf import storage
from bert_tf.checkpoints import readable, weight_map
from bert_tf.checkpoints.json_file import read_json_object
from bert_tf.layers.activations import TANH_GELU_NAMES
from bert_tf.models.encoder_config import EncoderConfig

CHECKPOINT_NAME = "bert_model.ckpt"
CONFIG_NAME = "bert_config.json"
VOCAB_NAME = "vocab.txt"
EXACT_ACT_KEY = "bert_tf_hidden_act"


def checkpoint_prefix(path):
    """Resolves a directory or a checkpoint prefix to the prefix to read."""
    if storage.isdir(path):
        latest = tf.train.latest_checkpoint(path)
        if latest:
            return latest
        candidate = os.path.join(path, CHECKPOINT_NAME)
        if storage.exists(candidate + ".index"):
            return candidate
        indexes = sorted(name for name in storage.listdir(path) if name.endswith(".index"))
        if len(indexes) == 1:
            return os.path.join(path, indexes[0][: -len(".index")])
        if indexes:
            raise ValueError(
                f"directory {path} holds several TF checkpoints {indexes} and no "
                "'checkpoint' file; pass the prefix of the one to load")
        raise FileNotFoundError(f"no TF checkpoint (*.index) found in directory {path}")
    if storage.exists(path + ".index"):
        return path
    if path.endswith(".index") and storage.exists(path):
        return path[: -len(".index")]
    raise FileNotFoundError(f"TF checkpoint not found: {path} (no {path}.index)")


def is_google_checkpoint(prefix):
    names = set(readable.checkpoint_reader(prefix).get_variable_to_shape_map())
    return "bert/embeddings/word_embeddings" in names


def read_config(directory):
    """The `EncoderConfig` of a Google checkpoint directory."""
    path = os.path.join(directory, CONFIG_NAME)
    values = read_json_object(
        path, "a Google BERT checkpoint ships bert_config.json beside bert_model.ckpt")
    act = values.pop(EXACT_ACT_KEY, None)
    if act is None:
        act = "gelu_tanh" if values.get("hidden_act", "gelu") == "gelu" else values["hidden_act"]
    values["hidden_act"] = act
    return EncoderConfig.from_bert_config(values, source=path)


def read_arrays(prefix, names):
    """Reads the named variables, converted to our layouts.

    Only names present in the checkpoint are returned; the caller reports
    what is missing. Fails clearly when the index lists a variable whose data
    shard is absent.
    """
    reader = readable.checkpoint_reader(prefix)
    available = reader.get_variable_to_shape_map()
    arrays = {}
    for name, kind in names.items():
        if name not in available:
            continue
        try:
            value = reader.get_tensor(name)
        except (tf.errors.OpError, ValueError) as e:
            raise ValueError(
                f"{prefix}: the index lists {name!r} but its data cannot be read "
                f"(is the .data-* shard missing or truncated?): {e}") from e
        arrays[name] = value.T if kind == weight_map.TRANSPOSED_KERNEL else value
    return arrays


def write(model, directory, vocab_file=None):
    """Writes `model` (encoder or pretrainer) as a Google TF1 checkpoint."""
    storage.makedirs(directory, exist_ok=True)
    slots = weight_map.model_slots(model)
    tensors = []
    for slot in slots:
        value = np.asarray(slot.variable.numpy())
        if slot.kind == weight_map.TRANSPOSED_KERNEL:
            value = value.T
        tensors.append(tf.constant(value))
    prefix = os.path.join(directory, CHECKPOINT_NAME)
    tf.raw_ops.SaveV2(
        prefix=prefix, tensor_names=[slot.name for slot in slots],
        shape_and_slices=[""] * len(slots), tensors=tensors)
    write_config(encoder_of(model).encoder_config, directory)
    if vocab_file:
        storage.copy(vocab_file, os.path.join(directory, VOCAB_NAME))
    return prefix


def write_config(config, directory):
    """Writes `config` as `directory/bert_config.json`, Google's way (see the module doc).

    Args:
      config: the encoder's `EncoderConfig`.
      directory: an existing directory.

    Returns:
      The path written.
    """
    values = config.to_bert_config()
    if config.hidden_act in TANH_GELU_NAMES:
        values["hidden_act"] = "gelu"
    else:
        values[EXACT_ACT_KEY] = config.hidden_act
    path = os.path.join(directory, CONFIG_NAME)
    with storage.open(path, "w", encoding="utf-8") as f:
        json.dump(values, f, indent=2)
    return path


def encoder_of(model):
    return getattr(model, "encoder", model)
