"""`load_encoder` / `load_pretrainer`: one entry point for every format.

Formats, detected from what is on disk:
  bert_tf  a directory with `bert_tf_model.json` (our exports and training runs)
  keras    a `.keras` file saved by Keras
  hf       a Hugging Face directory (`config.json` + `model.safetensors`,
           sharded safetensors or `pytorch_model.bin`) or a weights file
  google   a Google TF1 checkpoint (`bert/...` names) with `bert_config.json`
  garden   a Model Garden checkpoint written as `tf.train.Checkpoint(encoder=...)`

Loading never executes code from a checkpoint: TF checkpoints and
safetensors are read as data, PyTorch pickles only with
`torch.load(weights_only=True)`, JSON configs with `json`.
"""

import dataclasses
import os

import keras


from bert_tf.checkpoints import assign, google_tf1, hugging_face, model_garden, native, weight_map
from bert_tf.models.bert_encoder import BertEncoder
from bert_tf.models.bert_pretrainer import BertPretrainer
from bert_tf.text import tokenizer_contract as contracts

FORMATS = ("bert_tf", "keras", "hf", "google", "garden")


@dataclasses.dataclass
class LoadResult:
    """What a load produced and how: for reports and the converter."""

    model: object
    format: str
    source: str
    loaded: list
    initialised: list
    tokenizer_contract: dict = None
    vocab_file: str = None


def detect_format(path):
    """Names the checkpoint format at `path` (one of `FORMATS`)."""
    if not os.path.exists(path) and not os.path.exists(path + ".index"):
        raise FileNotFoundError(f"checkpoint not found: {path}")
    if os.path.isfile(path):
        if path.endswith(".keras"):
            return "keras"
        if path.endswith((".safetensors", ".bin", ".pt", hugging_face.SAFETENSORS_INDEX_NAME)):
            return "hf"
    if native.is_native(path):
        return "bert_tf"
    if os.path.isdir(path) and os.path.isfile(os.path.join(path, hugging_face.CONFIG_NAME)):
        try:
            hugging_face.weights_file(path)
            return "hf"
        except FileNotFoundError:
            pass
    try:
        prefix = google_tf1.checkpoint_prefix(path)
    except FileNotFoundError as e:
        raise ValueError(
            f"{path}: not a recognised checkpoint; expected one of {FORMATS} "
            "(see bert_tf.checkpoints.loading)") from e
    if google_tf1.is_google_checkpoint(prefix):
        return "google"
    if model_garden.is_garden_checkpoint(prefix):
        return "garden"
    raise ValueError(
        f"{prefix}: a TF checkpoint, but neither Google BERT names "
        "(bert/embeddings/...) nor a Model Garden encoder (encoder/...) were found")



def _source_dir(path):
    return path if os.path.isdir(path) else os.path.dirname(path)


def _read_config_and_contract(path, fmt, hidden_act):
    """(EncoderConfig, tokenizer contract or None, vocab file or None)."""
    directory = _source_dir(path)
    vocab = os.path.join(directory, "vocab.txt")
    vocab = vocab if os.path.isfile(vocab) else None
    if fmt == "bert_tf":
        metadata = native.read_metadata(path)
        from bert_tf.models.encoder_config import EncoderConfig
        config = EncoderConfig.from_dict(metadata["encoder_config"],
                                         source=os.path.join(path, native.METADATA_NAME))
        return config, metadata.get("tokenizer"), vocab
    if fmt == "hf":
        config = hugging_face.read_config(path)
        lower_case = hugging_face.read_lower_case(directory)
    elif fmt == "google":
        config = google_tf1.read_config(directory)
        lower_case = None
    else:  # garden
        prefix = google_tf1.checkpoint_prefix(path)
        config = model_garden.infer_config(prefix, hidden_act or "gelu_tanh")
        lower_case = None
    if hidden_act:
        config = config.replace(hidden_act=hidden_act)
    contract = None
    if vocab:
        if lower_case is None:
            lower_case = contracts.guess_lower_case(vocab)
        contract = contracts.contract_from_vocab(vocab, lower_case)
    return config, contract, vocab


@dataclasses.dataclass
class CheckpointInfo:
    """What a checkpoint says about itself, read without loading its weights."""

    format: str
    encoder_config: object
    tokenizer_contract: dict = None
    vocab_file: str = None


def describe(path, format=None, hidden_act=None):
    """The format, encoder config, tokenizer contract and shipped vocab of `path`.

    Fine-tuning uses it to size the model and find the vocabulary before
    any weight is read. `keras` files are not described (load them).
    """
    fmt = format or detect_format(path)
    if fmt == "keras":
        raise ValueError(f"{path}: a .keras file; load it with load_encoder to read its config")
    config, contract, vocab = _read_config_and_contract(path, fmt, hidden_act)
    return CheckpointInfo(fmt, config, contract, vocab)


def _read_arrays(path, fmt, slots):
    if fmt == "bert_tf":
        return native.read_arrays(native.weights_prefix(path), slots)
    if fmt == "hf":
        return hugging_face.arrays_for_slots(hugging_face.read_state_dict(path), slots)
    prefix = google_tf1.checkpoint_prefix(path)
    if fmt == "google":
        return google_tf1.read_arrays(prefix, {slot.name: slot.kind for slot in slots})
    return model_garden.read_checkpoint_arrays(prefix, slots)


def load(path, model_type="encoder", format=None, hidden_act=None, vocab_file=None,
         lower_case=None, use_nsp=True, dtype=None):
    """Loads a checkpoint into a new `BertEncoder` or `BertPretrainer`.

    Args:
      path: checkpoint directory, file or prefix.
      model_type: "encoder" or "pretrainer". A pretrainer loaded from a
        checkpoint without pretraining heads gets freshly initialised heads
        (listed in `LoadResult.initialised`).
      format: one of `FORMATS`; detected when None.
      hidden_act: overrides the activation (Model Garden checkpoints do not
        record it; Google's "gelu" is read as the tanh form).
      vocab_file, lower_case: when given, checked against the checkpoint's
        tokenizer contract; a mismatch raises `TokenizerContractError`.
      dtype: a Keras dtype policy name, e.g. "mixed_bfloat16".
    """
    if model_type not in ("encoder", "pretrainer"):
        raise ValueError(f"model_type must be 'encoder' or 'pretrainer', got {model_type!r}")
    fmt = format or detect_format(path)
    if fmt not in FORMATS:
        raise ValueError(f"unknown checkpoint format {fmt!r}; expected one of {FORMATS}")
    if fmt == "keras":
        return _load_keras(path, model_type)

    config, contract, shipped_vocab = _read_config_and_contract(path, fmt, hidden_act)
    if vocab_file:
        if lower_case is None:
            lower_case = contract["lower_case"] if contract else contracts.guess_lower_case(vocab_file)
        if contract:
            contracts.check_contract(contract, vocab_file, lower_case, source=path)
        else:
            contract = contracts.contract_from_vocab(vocab_file, lower_case)
        if contract["vocab_size"] != config.vocab_size:
            raise contracts.TokenizerContractError(
                f"vocab {vocab_file} has {contract['vocab_size']} tokens but the "
                f"checkpoint {path} has vocab_size {config.vocab_size}")

    encoder = BertEncoder.from_encoder_config(config, dtype=dtype)
    model = encoder if model_type == "encoder" else BertPretrainer(encoder, use_nsp=use_nsp)
    slots = weight_map.model_slots(model)
    head_names = {slot.name for slot in slots} - {
        slot.name for slot in weight_map.encoder_slots(encoder)}
    arrays = _read_arrays(path, fmt, slots)
    # A pretrainer may start from an encoder-only checkpoint; its heads are
    # then trained from their initial values. Heads must come whole or not at all.
    allow_missing = head_names if not (head_names & set(arrays)) else ()
    loaded = assign.assign_to_slots(slots, arrays, f"{fmt} checkpoint {path}", allow_missing)
    return LoadResult(model, fmt, path, loaded, sorted(set(head_names) - set(loaded)),
                      contract, vocab_file or shipped_vocab)


def _load_keras(path, model_type):
    model = keras.saving.load_model(path)
    if model_type == "encoder":
        model = getattr(model, "encoder", model)
        if not isinstance(model, BertEncoder):
            raise ValueError(f"{path}: holds a {type(model).__name__}, not a bert_tf model")
    elif not isinstance(model, BertPretrainer):
        raise ValueError(f"{path}: holds a {type(model).__name__}, not a BertPretrainer")
    names = [slot.name for slot in weight_map.model_slots(model)]
    return LoadResult(model, "keras", path, names, [])


def load_encoder(path, format=None, hidden_act=None, vocab_file=None, lower_case=None,
                 dtype=None):
    """Loads a pretrained `BertEncoder` from any supported checkpoint format.

    The equivalent of `from_pretrained`: `path` may be a bert_tf directory or
    training run, a `.keras` file, a Hugging Face directory or safetensors
    file, a Google TF1 checkpoint directory, or a Model Garden checkpoint.
    See `load` for the arguments.
    """
    return load(path, "encoder", format, hidden_act, vocab_file, lower_case,
                dtype=dtype).model


def load_pretrainer(path, format=None, hidden_act=None, vocab_file=None, lower_case=None,
                    use_nsp=True, dtype=None):
    """Loads a `BertPretrainer` (encoder + MLM/NSP heads) from any format."""
    return load(path, "pretrainer", format, hidden_act, vocab_file, lower_case,
                use_nsp=use_nsp, dtype=dtype).model


def save(model, directory, format="bert_tf", vocab_file=None, lower_case=None,
         tokenizer_contract=None):
    """Writes an encoder or pretrainer in `format` ("bert_tf", "google", "hf", "garden")."""
    if format == "bert_tf":
        if tokenizer_contract is None and vocab_file:
            if lower_case is None:
                lower_case = contracts.guess_lower_case(vocab_file)
            tokenizer_contract = contracts.contract_from_vocab(vocab_file, lower_case)
        return native.save(model, directory, tokenizer_contract, vocab_file)
    if format == "google":
        return google_tf1.write(model, directory, vocab_file)
    if format == "hf":
        return hugging_face.write(model, directory, vocab_file, lower_case)
    if format == "garden":
        os.makedirs(directory, exist_ok=True)
        return model_garden.write_checkpoint(getattr(model, "encoder", model), directory)
    raise ValueError(f"cannot write format {format!r}; expected bert_tf, google, hf or garden")


