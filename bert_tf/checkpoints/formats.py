"""Checkpoint formats: one `CheckpointFormat` per format, in one registry.

Each format says whether a path holds it (`detect`), what it holds without
reading weights (`describe`), loads it into a new encoder or pretrainer
(`load`) and writes one (`save`). `FORMATS` maps format names to formats
in detection order; `loading` and `python -m bert_tf.convert` read only it.

  bert_tf  a directory with `bert_tf_model.json` (our exports and training runs)
  keras    a `.keras` file saved by Keras (read only)
  hf       a Hugging Face directory (`config.json` + `model.safetensors`,
           sharded safetensors or `pytorch_model.bin`) or a weights file
  google   a Google TF1 checkpoint (`bert/...` names) with `bert_config.json`
  garden   a Model Garden checkpoint written as `tf.train.Checkpoint(encoder=...)`,
           with `bert_config.json` and `vocab.txt` beside it when bert_tf wrote it
  kerashub a KerasHub BERT preset directory (`config.json` naming `BertBackbone`,
           `model.weights.h5`, the tokenizer's vocabulary in `assets/tokenizer/`)

Loading never executes code from a checkpoint: TF checkpoints and
safetensors are read as data, PyTorch pickles only with
`torch.load(weights_only=True)`, JSON configs with `json`.
"""

from __future__ import annotations

import abc
import dataclasses
import os
from typing import Any

import keras

from bert_tf import storage
from bert_tf.checkpoints import (
    assign,
    google_tf1,
    hugging_face,
    keras_hub_preset,
    model_garden,
    native,
    weight_map,
)
from bert_tf.checkpoints.task_record import TaskRecord
from bert_tf.models.bert_classifier import BertClassifier
from bert_tf.models.bert_encoder import BertEncoder
from bert_tf.models.bert_pretrainer import BertPretrainer
from bert_tf.models.encoder_config import EncoderConfig
from bert_tf.models.task_model import TaskModel
from bert_tf.models.text_model import TextModel
from bert_tf.registry import Registry
from bert_tf.text import tokenizer_contract as contracts

# What `load` builds: the encoder, the encoder with MLM/NSP heads, or the
# model as it was trained (`task`: a fine-tuned model with its head).
MODEL_TYPES = ("encoder", "pretrainer", "task")


@dataclasses.dataclass
class LoadResult:
    """What a load produced and how: for reports and the converter."""

    model: object
    format: str
    source: str
    loaded: list
    initialised: list
    tokenizer_contract: dict | None = None
    vocab_file: str | None = None
    task_record: TaskRecord | None = None


@dataclasses.dataclass
class CheckpointInfo:
    """What a checkpoint says about itself, read without loading its weights."""

    format: str
    encoder_config: object
    tokenizer_contract: dict | None = None
    vocab_file: str | None = None


class CheckpointFormat(abc.ABC):
    """The contract of one checkpoint format.

    Subclasses set `name` (the key in `FORMATS`, the `--from`/`--to` value of
    the converter), `looks_for` (what a checkpoint of the format holds, in a
    few words: the error for a path that no format detects lists it), `writable` (False:
    `save` is refused) and `holds_heads` (False: the format stores an encoder
    only, and saving a pretrainer is refused rather than its MLM/NSP heads
    dropped). A format that stores a fine-tuned model's head says which models
    in `holds_task_model`.
    """

    name: str = ""
    looks_for: str = ""
    writable: bool = True
    holds_heads: bool = True

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    @abc.abstractmethod
    def detect(self, path: str) -> bool:
        """Whether `path` (an existing file, directory or checkpoint prefix) is in this format.

        Raises:
          ValueError: the path is ambiguous within this format (e.g. several
            checkpoints in one directory).
        """

    @abc.abstractmethod
    def describe(self, path: str, hidden_act: str | None = None) -> CheckpointInfo:
        """The encoder config, tokenizer contract and shipped vocab of `path`.

        Args:
          path: a checkpoint of this format.
          hidden_act: overrides the recorded activation, where the format allows.
        """

    @abc.abstractmethod
    def load(self, path: str, model_type: str, hidden_act: str | None = None,
             vocab_file: str | None = None, lower_case: bool | None = None,
             use_nsp: bool = True, dtype: str | None = None) -> LoadResult:
        """Loads `path` into a new model of `model_type`; see `loading.load`."""

    def holds_task_model(self, model: Any) -> bool:
        """Whether `save` writes this fine-tuned model (a `TaskModel`) with its head.

        Args:
          model: a task model, e.g. a `BertClassifier`.
        """
        return False

    def save(self, model: Any, directory: str, vocab_file: str | None = None,
             lower_case: bool | None = None, tokenizer_contract: dict | None = None,
             task_record: TaskRecord | None = None) -> str:
        """Writes an encoder, a pretrainer or a task model it holds; returns what was written.

        Args:
          model: a `BertEncoder`, a `BertPretrainer`, or a task model for which
            `holds_task_model` is true.
          directory: the output directory (created).
          vocab_file: copied beside the weights when given.
          lower_case: the tokenizer's casing, recorded where the format can.
          tokenizer_contract: bert_tf only: the contract to record.
          task_record: a task model's record (its labels, inputs and length), for
            the formats that store it.
        """
        raise _not_writable(self.name)


def _not_writable(name):
    names = writable_formats()
    expected = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
    return ValueError(f"cannot write format {name!r}; expected {expected}")


def _source_dir(path):
    return path if storage.isdir(path) else os.path.dirname(path)


def _shipped_vocab(path):
    vocab = os.path.join(_source_dir(path), "vocab.txt")
    return vocab if storage.isfile(vocab) else None


class WeightsFormat(CheckpointFormat):
    """A format of weights plus a config: loads by filling the slots of a new model.

    Subclasses read the config (`read_config`) and the arrays (`read_arrays`).
    """

    @abc.abstractmethod
    def read_config(self, path: str, hidden_act: str | None) -> tuple[EncoderConfig, bool | None]:
        """(encoder config, the tokenizer's lower_case or None when unrecorded)."""

    @abc.abstractmethod
    def read_arrays(self, path: str, slots: list) -> dict:
        """{canonical name: array in our layout} for the slots present in `path`."""

    def describe(self, path, hidden_act=None):
        config, lower_case = self.read_config(path, hidden_act)
        if hidden_act:
            config = config.replace(hidden_act=hidden_act)
        vocab = _shipped_vocab(path)
        contract = None
        if vocab:
            if lower_case is None:
                lower_case = contracts.guess_lower_case(vocab)
            contract = contracts.contract_from_vocab(vocab, lower_case)
        return CheckpointInfo(self.name, config, contract, vocab)

    def checked_contract(self, path: str, info: CheckpointInfo, vocab_file: str | None,
                         lower_case: bool | None) -> dict | None:
        """The tokenizer contract to record: the checkpoint's, checked against `vocab_file`.

        Raises:
          TokenizerContractError: `vocab_file` does not match the checkpoint.
        """
        contract = info.tokenizer_contract
        if not vocab_file:
            return contract
        if lower_case is None:
            lower_case = (contract["lower_case"] if contract
                          else contracts.guess_lower_case(vocab_file))
        if contract:
            contracts.check_contract(contract, vocab_file, lower_case, source=path)
        else:
            contract = contracts.contract_from_vocab(vocab_file, lower_case)
        if contract["vocab_size"] != info.encoder_config.vocab_size:
            raise contracts.TokenizerContractError(
                f"vocab {vocab_file} has {contract['vocab_size']} tokens but the "
                f"checkpoint {path} has vocab_size {info.encoder_config.vocab_size}")
        return contract

    def load(self, path, model_type, hidden_act=None, vocab_file=None, lower_case=None,
             use_nsp=True, dtype=None):
        if model_type == "task":
            raise ValueError(f"{path}: a {self.name} checkpoint holds no fine-tuned head; "
                             "--model task reads bert_tf directories, training runs and "
                             ".keras files")
        info = self.describe(path, hidden_act)
        contract = self.checked_contract(path, info, vocab_file, lower_case)
        encoder = BertEncoder.from_encoder_config(info.encoder_config, dtype=dtype)
        model = encoder if model_type == "encoder" else BertPretrainer(encoder, use_nsp=use_nsp)
        slots = weight_map.model_slots(model)
        head_names = {slot.name for slot in slots} - {
            slot.name for slot in weight_map.encoder_slots(encoder)}
        arrays = self.read_arrays(path, slots)
        # A pretrainer may start from an encoder-only checkpoint; its heads are
        # then trained from their initial values. Heads must come whole or not at all.
        allow_missing = head_names if not (head_names & set(arrays)) else ()
        loaded = assign.assign_to_slots(slots, arrays, f"{self.name} checkpoint {path}",
                                        allow_missing)
        return LoadResult(model, self.name, path, loaded, sorted(set(head_names) - set(loaded)),
                          contract, vocab_file or info.vocab_file)


class NativeFormat(WeightsFormat):
    """bert_tf's own directories (`native`), also training runs' `model_dir`s (their newest
    checkpoint that reads back), or one checkpoint of them (`run/ckpt-680`)."""

    name = "bert_tf"
    looks_for = "bert_tf_model.json, or a run's ckpt-N"

    def detect(self, path):
        return native.is_native(path) or native.is_native_checkpoint(path)

    def describe(self, path, hidden_act=None):
        # The recorded config and contract are exact: `hidden_act` is not applied.
        directory = _source_dir(path)
        metadata = native.read_metadata(directory)
        config = EncoderConfig.from_dict(metadata["encoder_config"],
                                         source=os.path.join(directory, native.METADATA_NAME))
        return CheckpointInfo(self.name, config, metadata.get("tokenizer"),
                              _shipped_vocab(path))

    def read_config(self, path, hidden_act):
        return self.describe(path).encoder_config, None

    def read_arrays(self, path, slots):
        if storage.isdir(path):
            return native.read_newest_arrays(path, slots)[1]
        return native.read_chosen_arrays(path, slots)

    def load(self, path, model_type, hidden_act=None, vocab_file=None, lower_case=None,
             use_nsp=True, dtype=None):
        if model_type != "task":
            return super().load(path, model_type, hidden_act, vocab_file, lower_case, use_nsp,
                                dtype)
        # The model as trained: the class, head and record that bert_tf_model.json names.
        directory = _source_dir(path)
        source = os.path.join(directory, native.METADATA_NAME)
        metadata = native.read_metadata(directory)
        record = (TaskRecord.from_dict(metadata["task"], f"{source} 'task'")
                  if "task" in metadata else None)
        model = native.build_model(metadata, source, dtype)
        contract = self.checked_contract(path, self.describe(path), vocab_file, lower_case)
        slots = weight_map.task_slots(model)
        loaded = assign.assign_to_slots(slots, self.read_arrays(path, slots),
                                        f"{self.name} checkpoint {path}")
        return LoadResult(model, self.name, path, loaded, [], contract,
                          vocab_file or _shipped_vocab(path), record)

    def holds_task_model(self, model):
        return True

    def save(self, model, directory, vocab_file=None, lower_case=None, tokenizer_contract=None,
             task_record=None):
        if tokenizer_contract is None and vocab_file:
            if lower_case is None:
                lower_case = contracts.guess_lower_case(vocab_file)
            tokenizer_contract = contracts.contract_from_vocab(vocab_file, lower_case)
        return native.save(model, directory, tokenizer_contract, vocab_file, task_record)


class KerasFormat(CheckpointFormat):
    """A `.keras` file of a bert_tf model; read only, loaded whole by Keras."""

    name = "keras"
    looks_for = "a .keras file"
    writable = False

    def detect(self, path):
        return storage.isfile(path) and path.endswith(".keras")

    def describe(self, path, hidden_act=None):
        raise ValueError(f"{path}: a .keras file; load it with load_encoder to read its config")

    def load(self, path, model_type, hidden_act=None, vocab_file=None, lower_case=None,
             use_nsp=True, dtype=None):
        model = keras.saving.load_model(path)
        if isinstance(model, TextModel):
            model = model.task_model  # a raw-text model: the weights are its task model's
        if model_type == "task":
            if not isinstance(model, (BertEncoder, TaskModel)):
                raise ValueError(f"{path}: holds a {type(model).__name__}, not a bert_tf model")
        elif model_type == "encoder":
            model = getattr(model, "encoder", model)
            if not isinstance(model, BertEncoder):
                raise ValueError(f"{path}: holds a {type(model).__name__}, not a bert_tf model")
        elif not isinstance(model, BertPretrainer):
            raise ValueError(f"{path}: holds a {type(model).__name__}, not a BertPretrainer")
        names = [slot.name for slot in weight_map.task_slots(model)]
        return LoadResult(model, self.name, path, names, [])


class HuggingFaceFormat(WeightsFormat):
    """Hugging Face `BertModel` / `BertForPreTraining` weights (`hugging_face`)."""

    name = "hf"
    looks_for = ("config.json with model.safetensors, sharded safetensors or "
                 "pytorch_model.bin, or the weights file")
    _WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", hugging_face.SAFETENSORS_INDEX_NAME)

    def detect(self, path):
        if storage.isfile(path):
            return path.endswith(self._WEIGHT_SUFFIXES)
        if storage.isdir(path) and storage.isfile(os.path.join(path, hugging_face.CONFIG_NAME)):
            try:
                hugging_face.weights_file(path)
                return True
            except FileNotFoundError:
                return False
        return False

    def read_config(self, path, hidden_act):
        return hugging_face.read_config(path), hugging_face.read_lower_case(_source_dir(path))

    def read_arrays(self, path, slots):
        return hugging_face.arrays_for_slots(hugging_face.read_state_dict(path), slots)

    def save(self, model, directory, vocab_file=None, lower_case=None, tokenizer_contract=None,
             task_record=None):
        return hugging_face.write(model, directory, vocab_file, lower_case)


def _tf_checkpoint_prefix(path):
    """The TF checkpoint prefix at `path`, or None when there is none."""
    try:
        return google_tf1.checkpoint_prefix(path)
    except FileNotFoundError:
        return None


class TfCheckpointFormat(WeightsFormat):
    """A format stored as a name-based TF checkpoint, told apart by its variable names."""

    @abc.abstractmethod
    def has_own_names(self, prefix: str) -> bool:
        """Whether the checkpoint at `prefix` names its variables this format's way."""

    def detect(self, path):
        prefix = _tf_checkpoint_prefix(path)
        return prefix is not None and self.has_own_names(prefix)


class GoogleFormat(TfCheckpointFormat):
    """google-research/bert TF1 checkpoints (`google_tf1`)."""

    name = "google"
    looks_for = "a TF checkpoint of bert/... variables, with bert_config.json"

    def has_own_names(self, prefix):
        return google_tf1.is_google_checkpoint(prefix)

    def read_config(self, path, hidden_act):
        return google_tf1.read_config(_source_dir(path)), None

    def read_arrays(self, path, slots):
        prefix = google_tf1.checkpoint_prefix(path)
        return google_tf1.read_arrays(prefix, {slot.name: slot.kind for slot in slots})

    def save(self, model, directory, vocab_file=None, lower_case=None, tokenizer_contract=None,
             task_record=None):
        return google_tf1.write(model, directory, vocab_file)


class ModelGardenFormat(TfCheckpointFormat):
    """Model Garden `BertEncoderV2` checkpoints (`model_garden`); encoder only.

    Written as Model Garden publishes its BERT checkpoints: the checkpoint with
    `bert_config.json` (Google's names, so the activation travels) and `vocab.txt`
    beside it. A checkpoint without `bert_config.json` is read with the tanh GELU.
    """

    name = "garden"
    looks_for = "a TF checkpoint of encoder/... variables"
    holds_heads = False

    def has_own_names(self, prefix):
        return model_garden.is_garden_checkpoint(prefix)

    def read_config(self, path, hidden_act):
        prefix = google_tf1.checkpoint_prefix(path)
        # The checkpoint holds the shapes; the activation, when no bert_config.json
        # records it, is Model Garden's default.
        config = model_garden.infer_config(prefix, hidden_act or "gelu_tanh")
        directory = _source_dir(path)
        if storage.isfile(os.path.join(directory, google_tf1.CONFIG_NAME)):
            config = model_garden.with_recorded_settings(
                config, google_tf1.read_config(directory),
                os.path.join(directory, google_tf1.CONFIG_NAME))
        return config, None

    def read_arrays(self, path, slots):
        return model_garden.read_checkpoint_arrays(google_tf1.checkpoint_prefix(path), slots)

    def save(self, model, directory, vocab_file=None, lower_case=None, tokenizer_contract=None,
             task_record=None):
        storage.makedirs(directory, exist_ok=True)
        encoder = getattr(model, "encoder", model)
        prefix = model_garden.write_checkpoint(encoder, directory)
        google_tf1.write_config(encoder.encoder_config, directory)
        if vocab_file:
            storage.copy(vocab_file, os.path.join(directory, google_tf1.VOCAB_NAME))
        return prefix


class KerasHubFormat(WeightsFormat):
    """KerasHub `BertBackbone` presets (`keras_hub_preset`); encoder only.

    The vocabulary is the preset's tokenizer asset, not a `vocab.txt` beside
    the weights; a preset without one is refused.
    """

    name = "kerashub"
    looks_for = (f"KerasHub's {keras_hub_preset.CONFIG_NAME}, {keras_hub_preset.WEIGHTS_NAME} "
                 f"and {keras_hub_preset.VOCAB_PATH}")
    holds_heads = False

    def detect(self, path):
        return keras_hub_preset.is_preset(path)

    def describe(self, path, hidden_act=None):
        config, lower_case = self.read_config(path, hidden_act)
        if hidden_act:
            config = config.replace(hidden_act=hidden_act)
        vocab = keras_hub_preset.vocab_file(path)
        if lower_case is None:
            lower_case = contracts.guess_lower_case(vocab)
        contract = contracts.contract_from_vocab(vocab, lower_case)
        if contract["vocab_size"] != config.vocab_size:
            raise ValueError(f"{vocab}: {contract['vocab_size']} tokens; expected "
                             f"vocabulary_size {config.vocab_size} from the preset's config.json")
        return CheckpointInfo(self.name, config, contract, vocab)

    def read_config(self, path, hidden_act):
        return keras_hub_preset.read_config(path), keras_hub_preset.read_lower_case(path)

    def read_arrays(self, path, slots):
        return keras_hub_preset.read_arrays(path, slots)

    def holds_task_model(self, model):
        # KerasHub's BertTextClassifier: dropout and a dense layer on the pooled output.
        return isinstance(model, BertClassifier)

    def save(self, model, directory, vocab_file=None, lower_case=None, tokenizer_contract=None,
             task_record=None):
        sequence_length = task_record.max_seq_length if task_record else None
        return keras_hub_preset.write_preset(model, directory, vocab_file, lower_case,
                                             sequence_length)


# Format name -> format, in detection order: the first whose `detect` holds wins.
FORMATS: Registry[CheckpointFormat] = Registry("checkpoint format", CheckpointFormat)


def register_format(fmt: CheckpointFormat) -> CheckpointFormat:
    """Adds `fmt` to `FORMATS` (detected after those registered before it); returns it.

    Args:
      fmt: a format whose name is not registered yet.

    Raises:
      TypeError: `fmt` is not a `CheckpointFormat`.
      ValueError: its name is empty or taken.
    """
    return FORMATS.add(fmt)


def get_format(name: str) -> CheckpointFormat:
    """The registered format called `name`.

    Args:
      name: a key of `FORMATS`, e.g. "hf".

    Raises:
      ValueError: naming the unknown format and the known ones.
    """
    return FORMATS.lookup(name)


def writable_formats() -> list[str]:
    """The names of the formats `save` can write, in registry order."""
    return [name for name, fmt in FORMATS.items() if fmt.writable]


def get_writer(name: str) -> CheckpointFormat:
    """The registered format called `name`, when it can be written.

    Args:
      name: a key of `FORMATS`, e.g. "google".

    Raises:
      ValueError: `name` is unknown or read only, naming the writable formats.
    """
    if name not in writable_formats():
        raise _not_writable(name)
    return FORMATS[name]


def check_holds(fmt: CheckpointFormat, model: Any) -> None:
    """Refuses a model whose weights `fmt` cannot all store.

    Args:
      fmt: the format to write.
      model: a `BertEncoder`, `BertPretrainer` or fine-tuned task model.

    Raises:
      ValueError: `model` is a pretrainer and `fmt` holds an encoder only, or a
        task model whose head `fmt` cannot store.
    """
    if isinstance(model, BertPretrainer):
        if not fmt.holds_heads:
            raise ValueError(f"format {fmt.name!r} holds an encoder only: the pretrainer's MLM "
                             "and NSP heads would be lost; write its encoder (--model encoder)")
    elif isinstance(model, TaskModel) and not fmt.holds_task_model(model):
        raise ValueError(f"format {fmt.name!r} cannot hold the head of a "
                         f"{type(model).__name__}; write its encoder (--model encoder)")


def detect_format(path: str) -> str:
    """Names the format of the checkpoint at `path`: the first of `FORMATS` that detects it.

    Args:
      path: a checkpoint directory, file or prefix.

    Raises:
      FileNotFoundError: nothing exists at `path`.
      ValueError: no format recognises it (naming the formats tried and what each
        looks for).
    """
    if not storage.exists(path) and not storage.exists(path + ".index"):
        raise FileNotFoundError(f"checkpoint not found: {path}")
    for name, fmt in FORMATS.items():
        if fmt.detect(path):
            return name
    prefix = _tf_checkpoint_prefix(path)
    if prefix is None:
        looked_for = "; ".join(f"{name} ({fmt.looks_for})" if fmt.looks_for else name
                               for name, fmt in FORMATS.items())
        raise ValueError(f"{path}: not a recognised checkpoint; looked for {looked_for}")
    raise ValueError(
        f"{prefix}: a TF checkpoint, but neither Google BERT names "
        "(bert/embeddings/...) nor a Model Garden encoder (encoder/...) were found")


for _format in (NativeFormat(), KerasFormat(), HuggingFaceFormat(), GoogleFormat(),
                ModelGardenFormat(), KerasHubFormat()):
    register_format(_format)
del _format
