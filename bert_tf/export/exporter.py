"""`export_model` / `export_model_dir`: write a versioned raw-text SavedModel.

    EXPORTS/NAME/<version>/
      saved_model.pb, variables/      see `serving_module.build_serving_module`
      assets/vocab.txt                the tokenizer's vocabulary
      assets.extra/bert_tf_export.json          what was exported (see `export_metadata`)
      assets.extra/tf_serving_warmup_requests   TF Serving warm-up requests
"""

import json
import logging
import os

import tensorflow as tf

from bert_tf import storage
from bert_tf.checkpoints import native
from bert_tf.checkpoints.task_record import TaskRecord
from bert_tf.export import versions, warmup
from bert_tf.export.serving_module import build_serving_module
from bert_tf.layers.inference_projections import check_quantization, inference_projections
from bert_tf.text import tokenizer_contract as contracts
from bert_tf.text.tokenizer import BertTokenizer
from bert_tf.version import __version__

METADATA_FILE = "bert_tf_export.json"


def export_metadata(model, tokenizer: BertTokenizer, record: TaskRecord, signatures,
                    quantization: str | None = None) -> dict:
    """The `assets.extra/bert_tf_export.json` record of an export.

    Args:
      model: the exported model.
      tokenizer: its tokenizer (the contract is recorded).
      record: the export's `TaskRecord`, stored under "task" (`to_dict()`);
        its name, kind, labels and length are repeated at the top level.
      signatures: `{name: concrete function}` of the SavedModel.
      quantization: None or "int8" (the Transformer blocks' projections).
    """
    encoder = getattr(model, "encoder", model)
    return {
        "format": "bert_tf_export",
        "bert_tf_version": __version__,
        "tensorflow_version": tf.__version__,
        "model_class": type(model).__name__,
        "encoder_config": encoder.encoder_config.to_dict(),
        "task": record.to_dict(),
        "task_name": record.name,
        "kind": record.kind,
        "label_names": list(record.label_names) if record.label_names is not None else None,
        "max_seq_length": record.max_seq_length,
        "tokenizer": tokenizer.tokenizer_contract(),
        "quantization": quantization,
        # Input names per signature, in declaration order.
        "signatures": {name: [spec.name for spec in tf.nest.flatten(fn.structured_input_signature)]
                       for name, fn in signatures.items()},
    }


def _write_json(path, values):
    storage.makedirs(os.path.dirname(path), exist_ok=True)
    with storage.open(path, "w", encoding="utf-8") as f:
        json.dump(values, f, indent=2, sort_keys=True)


def export_model(model, tokenizer: BertTokenizer, export_base: str, record: TaskRecord,
                 version: int | None = None, quantization: str | None = None) -> str:
    """Exports a Keras model with its tokenizer as `export_base/<version>/`.

    Args:
      model: a bert_tf model (encoder or task model), float32 or mixed precision.
      tokenizer: the `BertTokenizer` the model was trained with.
      export_base: `EXPORTS/NAME`; the versions live under it.
      record: the model's `TaskRecord` (checked when it was made).
      version: int, default one more than the highest existing version.

    Returns:
      the path of the new version directory.

    Raises:
      FileExistsError: the version exists (nothing is changed).
      TypeError: `record` is not a `TaskRecord`.
      ValueError: the record does not fit the model, or the tokenizer does
        not, or `quantization` is unknown.
    """
    check_quantization(quantization)
    if not isinstance(record, TaskRecord):
        raise TypeError(f"record must be a TaskRecord (bert_tf.checkpoints.task_record), "
                        f"got {type(record).__name__}; build one with TaskRecord(...) or "
                        "TaskRecord.from_dict(...)")
    record.check_fits(native.model_metadata(model), "the task record")
    vocab_size = getattr(model, "encoder", model).encoder_config.vocab_size
    if tokenizer.vocab_size > vocab_size:
        raise ValueError(
            f"the tokenizer's vocab ({tokenizer.vocab_size} tokens, {tokenizer.vocab_file}) "
            f"is larger than the model's vocab_size {vocab_size}")
    model_name = os.path.basename(os.path.normpath(export_base))
    # The signatures are traced (and saved) on projections made once from the weights.
    projections = inference_projections(getattr(model, "encoder", model), quantization,
                                        record.max_seq_length)
    with projections, versions.atomic_version_dir(export_base, version) as (temporary, final):
        module, signatures = build_serving_module(model, tokenizer, record)
        tf.saved_model.save(module, temporary, signatures=signatures)
        _write_json(os.path.join(temporary, "assets.extra", METADATA_FILE),
                    export_metadata(model, tokenizer, record, signatures, quantization))
        warmup.write_warmup_requests(temporary, model_name, record)
    return final


def model_dir_record(metadata: dict, max_seq_length: int | None = None,
                     source: str = native.METADATA_NAME) -> TaskRecord:
    """The task record a model directory exports with, made (and checked) once.

    Args:
      metadata: the directory's `bert_tf_model.json` object, as read.
      max_seq_length: overrides the recorded length; required when the
        directory has no "task" (written before task records existed).
      source: names the file in errors.

    Raises:
      ValueError: naming the key that is missing or invalid.
    """
    if "task" not in metadata:
        return TaskRecord.for_model(metadata, max_seq_length, source)
    values = metadata["task"]
    if max_seq_length is not None and isinstance(values, dict):
        values = {**values, "max_seq_length": max_seq_length}
    return TaskRecord.from_dict(values, f"{source} 'task'")


def check_model_dir(model_dir: str) -> str:
    """Refuses, before anything is read or built, a `model_dir` that cannot be exported.

    Checked in the order a user meets the problems: the directory, its
    `bert_tf_model.json`, a checkpoint to read the weights from.

    Args:
      model_dir: the directory given to `export_model_dir`.

    Returns:
      the prefix of the checkpoint the export will read.

    Raises:
      FileNotFoundError: naming `model_dir` and what it lacks.
    """
    if not storage.exists(model_dir):
        raise FileNotFoundError(f"model directory {model_dir} does not exist")
    if not storage.isdir(model_dir):
        raise FileNotFoundError(f"model directory {model_dir} is not a directory")
    if not storage.isfile(os.path.join(model_dir, native.METADATA_NAME)):
        raise FileNotFoundError(
            f"{model_dir} is not a bert_tf model directory (no {native.METADATA_NAME}); "
            "export a training run's model_dir, or convert other checkpoints first with "
            "python -m bert_tf.convert")
    try:
        return native.weights_prefix(model_dir)
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{model_dir} has no checkpoint (no ckpt-N or {native.WEIGHTS_PREFIX}.* files): "
            "nothing to export; has the run saved one yet?") from None


def load_model_dir(model_dir: str, max_seq_length: int | None = None):
    """(model, tokenizer, task record) of a bert_tf model directory, weights restored.

    Reads `bert_tf_model.json`, `vocab.txt` and the newest checkpoint;
    the tokenizer's lower-casing comes from the recorded tokenizer contract,
    which the vocab file must match.

    Args:
      model_dir: the directory (`python -m bert_tf.train`'s or `convert`'s output).
      max_seq_length: overrides the record's length (required when the
        directory records no task).

    Raises:
      FileNotFoundError: `model_dir` does not exist, is no bert_tf model
        directory or has no checkpoint (see `check_model_dir`), or has no vocab.
      ValueError: the record or the tokenizer contract is invalid.
    """
    check_model_dir(model_dir)
    source = os.path.join(model_dir, native.METADATA_NAME)
    vocab_file = os.path.join(model_dir, native.VOCAB_NAME)
    if not storage.isfile(vocab_file):
        raise FileNotFoundError(f"{model_dir}: no {native.VOCAB_NAME} to build the tokenizer from")
    metadata = native.read_metadata(model_dir)
    record = model_dir_record(metadata, max_seq_length, source)
    contract = metadata.get("tokenizer")
    if contract:
        lower_case = contract["lower_case"]
        contracts.check_contract(contract, vocab_file, lower_case, source=source)
    else:
        lower_case = contracts.guess_lower_case(vocab_file)
    # Built from the metadata already read: the record is not read twice.
    model = native.build_model(metadata, source)
    logging.info("exporting the weights of %s", native.restore_weights(model, model_dir))
    return model, BertTokenizer(vocab_file, lower_case=lower_case), record


def export_model_dir(model_dir: str, export_base: str, version: int | None = None,
                     max_seq_length: int | None = None,
                     quantization: str | None = None) -> str:
    """Exports a bert_tf model directory (a training run's `model_dir`) as a SavedModel.

    Args:
      model_dir: the directory (`python -m bert_tf.train`'s or `convert`'s output).
      export_base: `EXPORTS/NAME`.
      version: see `export_model`.
      max_seq_length: overrides the record's length (required when the
        directory records no task).
      quantization: see `export_model`.

    Raises:
      FileNotFoundError: see `load_model_dir`.
      FileExistsError, ValueError: see `export_model`.
    """
    check_quantization(quantization)
    model, tokenizer, record = load_model_dir(model_dir, max_seq_length)
    return export_model(model, tokenizer, export_base, record, version, quantization)
