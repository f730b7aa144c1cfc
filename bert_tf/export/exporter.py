"""`export_model` / `export_model_dir`: write a versioned raw-text SavedModel.

    EXPORTS/NAME/<version>/
      saved_model.pb, variables/      see `serving_module.build_serving_module`
      assets/vocab.txt                the tokenizer's vocabulary
      assets.extra/bert_tf_export.json          what was exported (see `export_metadata`)
      assets.extra/tf_serving_warmup_requests   TF Serving warm-up requests
"""

import json
import os

import tensorflow as tf

import bert_tf
from bert_tf.checkpoints import native
from bert_tf.export import task_info as task_infos
from bert_tf.export import versions, warmup
from bert_tf.export.serving_module import build_serving_module
from bert_tf.text import tokenizer_contract as contracts
from bert_tf.text.tokenizer import BertTokenizer

METADATA_FILE = "bert_tf_export.json"


def export_metadata(model, tokenizer, task_info, signatures):
    """The `assets.extra/bert_tf_export.json` record of an export."""
    encoder = getattr(model, "encoder", model)
    return {
        "format": "bert_tf_export",
        "bert_tf_version": bert_tf.__version__,
        "tensorflow_version": tf.__version__,
        "model_class": type(model).__name__,
        "encoder_config": encoder.encoder_config.to_dict(),
        "task": task_info,
        "task_name": task_info["name"],
        "kind": task_info["kind"],
        "label_names": task_info.get("label_names"),
        "max_seq_length": task_info["max_seq_length"],
        "tokenizer": tokenizer.tokenizer_contract(),
        # Input names per signature, in declaration order.
        "signatures": {name: [spec.name for spec in tf.nest.flatten(fn.structured_input_signature)]
                       for name, fn in signatures.items()},
    }


def _write_json(path, values):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(values, f, indent=2, sort_keys=True)


def export_model(model, tokenizer, export_base, task_info, version=None):
    """Exports a Keras model with its tokenizer as `export_base/<version>/`.

    Args:
      model: a bert_tf model (encoder or task model), float32 or mixed precision.
      tokenizer: the `BertTokenizer` the model was trained with.
      export_base: `EXPORTS/NAME`; the versions live under it.
      task_info: task-info dict (`native.validate_task_info`).
      version: int, default one more than the highest existing version.

    Returns:
      the path of the new version directory.

    Raises:
      FileExistsError: the version exists (nothing is changed).
      ValueError: the task info is invalid or does not fit the model or tokenizer.
    """
    task_info = native.validate_task_info(task_info)
    task_infos.check_fits_model(task_info, native.model_metadata(model), "task_info")
    vocab_size = getattr(model, "encoder", model).encoder_config.vocab_size
    if tokenizer.vocab_size > vocab_size:
        raise ValueError(
            f"the tokenizer's vocab ({tokenizer.vocab_size} tokens, {tokenizer.vocab_file}) "
            f"is larger than the model's vocab_size {vocab_size}")
    module, signatures = build_serving_module(model, tokenizer, task_info)
    model_name = os.path.basename(os.path.normpath(export_base))
    with versions.atomic_version_dir(export_base, version) as (temporary, final):
        tf.saved_model.save(module, temporary, signatures=signatures)
        _write_json(os.path.join(temporary, "assets.extra", METADATA_FILE),
                    export_metadata(model, tokenizer, task_info, signatures))
        warmup.write_warmup_requests(temporary, model_name, task_info)
    return final


def export_model_dir(model_dir, export_base, version=None, max_seq_length=None):
    """Exports a bert_tf model directory (a training run's `model_dir`).

    Reads `bert_tf_model.json`, `vocab.txt` and the newest checkpoint;
    the tokenizer's lower-casing comes from the recorded tokenizer contract,
    which the vocab file must match. `max_seq_length` overrides the task's
    (and is required when the directory records no task).
    """
    source = os.path.join(model_dir, native.METADATA_NAME)
    vocab_file = os.path.join(model_dir, native.VOCAB_NAME)
    if not os.path.isfile(vocab_file):
        raise FileNotFoundError(f"{model_dir}: no {native.VOCAB_NAME} to build the tokenizer from")
    metadata = native.read_metadata(model_dir)
    task_info = task_infos.resolve_task_info(metadata, max_seq_length, source)
    contract = metadata.get("tokenizer")
    if contract:
        lower_case = contract["lower_case"]
        contracts.check_contract(contract, vocab_file, lower_case, source=source)
    else:
        lower_case = contracts.guess_lower_case(vocab_file)
    model, _ = native.load_model(model_dir)
    tokenizer = BertTokenizer(vocab_file, lower_case=lower_case)
    return export_model(model, tokenizer, export_base, task_info, version)
