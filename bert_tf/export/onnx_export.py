"""`export_onnx_model_dir`: a model directory -> an ONNX model of the token-id path.

    EXPORTS/NAME/<version>/           (the layout Triton's model repository reads)
      model.onnx          token ids in, the numeric outputs of `serve_token_ids` out
      vocab.txt           the tokenizer's vocabulary
      bert_tf_onnx.json   how to tokenize and what the inputs may hold (`onnx_metadata`)

The graph is the model's `serve_token_ids` computation converted by tf2onnx
(string outputs, such as label names, are left out: the JSON lists the
labels). ONNX has no op that fails a request, so the checks that
`serve_token_ids` makes (ids inside the vocabulary, type ids inside the type
vocabulary, a 0/1 mask, equal shapes) are not in the model: the client must
make them, for example with `bert_tf.export.onnx_inputs.check_token_ids`.
An ONNX graph fed an id outside the vocabulary gathers out of bounds.

`quantization="int8"` writes ONNX Runtime's dynamic quantization of the float
model (int8 weights, uint8 activations quantized per call).

Needs the `onnx` extra: `pip install "bert_tf[onnx]"` (onnx, tf2onnx, and
onnxruntime for int8).
"""

from __future__ import annotations

import json
import os

import tensorflow as tf

from bert_tf import console, storage
from bert_tf.checkpoints.task_record import TaskRecord
from bert_tf.export import kinds, versions
from bert_tf.export.onnx_inputs import INPUT_NAMES, METADATA_FILE, MODEL_FILE, VOCAB_FILE
from bert_tf.export.serving_module import SERVING_PAD_MULTIPLE
from bert_tf.layers.inference_projections import check_quantization
from bert_tf.optional_imports import import_optional
from bert_tf.text.segment_packer import SegmentPacker
from bert_tf.version import __version__

OPSET = 17
_PIP = "bert_tf[onnx]"


def token_ids_function(model, tokenizer, record: TaskRecord) -> tf.types.experimental.Function:
    """The `serve_token_ids` computation without its input checks or string outputs.

    Args:
      model: a bert_tf Keras model (encoder or task model).
      tokenizer: its `BertTokenizer`.
      record: its `TaskRecord` (the kind picks the outputs).

    Returns:
      a `tf.function` of int32 `input_word_ids`, `input_mask`, `input_type_ids`
      ([B, S], or [B, C, S] for multiple choice) returning {name: tensor}.
    """
    kind = kinds.serving_kind(record.kind)
    packer = SegmentPacker.from_tokenizer(tokenizer, record.max_seq_length,
                                          pad_to_multiple=SERVING_PAD_MULTIPLE)
    context = kinds.ServingContext(model, tokenizer, packer, record)
    shape = kind.token_ids_shape(record)
    specs = [tf.TensorSpec(shape, tf.int32, name=name) for name in INPUT_NAMES]

    @tf.function(input_signature=specs)
    def token_ids(input_word_ids, input_mask, input_type_ids):
        outputs = kind.serve_features(context, {"token_ids": input_word_ids,
                                                "segment_ids": input_type_ids,
                                                "padding_mask": input_mask})
        return {name: value for name, value in outputs.items() if value.dtype != tf.string}

    return token_ids


def onnx_metadata(model, tokenizer, record: TaskRecord, output_names,
                  quantization: str | None) -> dict:
    """The `bert_tf_onnx.json` beside an ONNX export: how to make its inputs.

    Args:
      model: the exported model.
      tokenizer: its `BertTokenizer`.
      record: its `TaskRecord`.
      output_names: the ONNX model's outputs.
      quantization: None or "int8".
    """
    encoder = getattr(model, "encoder", model)
    config = encoder.encoder_config
    contract = tokenizer.tokenizer_contract()
    return {
        "format": "bert_tf_onnx",
        "bert_tf_version": __version__,
        "task": record.to_dict(),
        "kind": record.kind,
        "label_names": list(record.label_names) if record.label_names is not None else None,
        "quantization": quantization,
        "opset": OPSET,
        "inputs": {
            "names": list(INPUT_NAMES),
            "dtype": "int32",
            "shape": ["batch", "choices", "sequence"] if record.kind == "multiple_choice"
            else ["batch", "sequence"],
            # The checks the model does not make (see `onnx_inputs.check_token_ids`).
            "input_word_ids": {"min": 0, "max": contract["vocab_size"] - 1},
            "input_type_ids": {"min": 0, "max": config.type_vocab_size - 1},
            "input_mask": {"min": 0, "max": 1},
            "max_sequence_length": config.max_position_embeddings,
        },
        "outputs": list(output_names),
        "tokenizer": {
            "vocab_file": VOCAB_FILE,
            "lower_case": contract["lower_case"],
            "vocab_sha256": contract["vocab_sha256"],
            "special_token_ids": contract["special_token_ids"],
            # As the SavedModel's raw-text signatures pack a request.
            "max_seq_length": record.max_seq_length,
            "pad_to_multiple": SERVING_PAD_MULTIPLE,
            "packing": "[CLS] A [SEP] (B [SEP]); type ids 0 for A, 1 for B; "
                       "the longer segment is trimmed first",
        },
    }


def export_onnx(model, tokenizer, export_base: str, record: TaskRecord,
                version: int | None = None, quantization: str | None = None) -> str:
    """Writes `export_base/<version>/` with `model.onnx`, `vocab.txt` and the JSON.

    Args:
      model: a bert_tf Keras model.
      tokenizer: its `BertTokenizer`.
      export_base: `EXPORTS/NAME`.
      record: the model's `TaskRecord`.
      version: int, default one more than the highest existing.
      quantization: None (float32) or "int8" (ONNX Runtime's dynamic quantization).

    Returns:
      the version directory.

    Raises:
      MissingDependencyError: onnx, tf2onnx or (for int8) onnxruntime is not installed.
      ValueError: `quantization` is unknown.
      FileExistsError: the version exists.
    """
    check_quantization(quantization)
    tf2onnx = import_optional("tf2onnx", "tf2onnx", "the ONNX export", _PIP)
    import_optional("onnx", "onnx", "the ONNX export", _PIP)
    if quantization == "int8":
        quantization_module = import_optional(
            "onnxruntime.quantization", "onnxruntime", "the int8 ONNX export", _PIP)
    function = token_ids_function(model, tokenizer, record)
    specs = function.input_signature
    output_names = sorted(function.get_concrete_function().structured_outputs)
    with versions.atomic_version_dir(export_base, version) as (temporary, final):
        storage.makedirs(temporary)
        path = os.path.join(temporary, MODEL_FILE)
        float_path = path if quantization is None else os.path.join(temporary, "float.onnx")
        with console.third_party_quiet():
            tf2onnx.convert.from_function(function, input_signature=specs, opset=OPSET,
                                          output_path=float_path)
            if quantization == "int8":
                quantization_module.quantize_dynamic(
                    float_path, path, weight_type=quantization_module.QuantType.QInt8)
        if quantization == "int8":
            storage.remove(float_path)
        storage.copy(tokenizer.vocab_file, os.path.join(temporary, VOCAB_FILE))
        with storage.open(os.path.join(temporary, METADATA_FILE), "w", encoding="utf-8") as f:
            json.dump(onnx_metadata(model, tokenizer, record, output_names, quantization), f,
                      indent=2, sort_keys=True)
    return final


def export_onnx_model_dir(model_dir: str, export_base: str, version: int | None = None,
                          max_seq_length: int | None = None,
                          quantization: str | None = None) -> str:
    """Exports a bert_tf model directory as an ONNX model (see `export_onnx`).

    Args:
      model_dir: the directory (`python -m bert_tf.train`'s or `convert`'s output).
      export_base: `EXPORTS/NAME`.
      version, quantization: see `export_onnx`.
      max_seq_length: overrides the record's length (required when the
        directory records no task).

    Raises:
      FileNotFoundError: see `exporter.load_model_dir`.
      MissingDependencyError, ValueError, FileExistsError: see `export_onnx`.
    """
    from bert_tf.export.exporter import load_model_dir

    check_quantization(quantization)
    model, tokenizer, record = load_model_dir(model_dir, max_seq_length)
    return export_onnx(model, tokenizer, export_base, record, version, quantization)
