"""The checks an ONNX export's client makes before a request (numpy only, no TensorFlow).

ONNX has no op that fails a request with a message, so an ONNX model made from
`serve_token_ids` cannot refuse bad ids the way the SavedModel does. Call
`check_token_ids` on every request:

    import json, numpy as np, onnxruntime as ort
    from bert_tf.export.onnx_inputs import check_token_ids, read_metadata

    metadata = read_metadata("exports/sst2_onnx/1")
    feed = {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}
    check_token_ids(feed, metadata)  # ValueError naming the bad input
    session = ort.InferenceSession("exports/sst2_onnx/1/model.onnx")
    outputs = session.run(None, feed)
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

import numpy as np

from bert_tf import storage

MODEL_FILE = "model.onnx"
VOCAB_FILE = "vocab.txt"
METADATA_FILE = "bert_tf_onnx.json"
INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")


def read_metadata(export_dir: str) -> dict:
    """The `bert_tf_onnx.json` of an ONNX export version directory.

    Raises:
      FileNotFoundError: naming the missing file.
      ValueError: the file is not the JSON of a bert_tf ONNX export.
    """
    path = os.path.join(export_dir, METADATA_FILE)
    if not storage.isfile(path):
        raise FileNotFoundError(f"{export_dir} is not a bert_tf ONNX export (no {METADATA_FILE})")
    with storage.open(path, encoding="utf-8") as f:
        try:
            metadata = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(metadata, dict) or metadata.get("format") != "bert_tf_onnx":
        raise ValueError(f"{path}: not a bert_tf ONNX export record (format is not "
                         "'bert_tf_onnx')")
    return metadata


def check_token_ids(feed: Mapping[str, np.ndarray], metadata: Mapping) -> None:
    """Raises ValueError naming the first input an ONNX export must not be given.

    Checks what the SavedModel's `serve_token_ids` checks: the three inputs
    present, of the model's integer dtype (ONNX Runtime would refuse another
    without naming the input), of the rank the model takes and of one shape; the
    sequence no longer than the position table; word ids inside the
    vocabulary, type ids inside the type vocabulary, mask values 0 or 1.

    Args:
      feed: {input name: array} as given to ONNX Runtime.
      metadata: the export's `bert_tf_onnx.json` (`read_metadata`).
    """
    inputs = metadata["inputs"]
    missing = [name for name in INPUT_NAMES if name not in feed]
    if missing:
        raise ValueError(f"missing inputs {missing}; the model takes {list(INPUT_NAMES)}")
    rank = len(inputs["shape"])
    shape = None
    for name in INPUT_NAMES:
        value = np.asarray(feed[name])
        if value.dtype != np.dtype(inputs["dtype"]):
            raise ValueError(f"{name}: expected {inputs['dtype']} integers, got {value.dtype}")
        if value.ndim != rank:
            raise ValueError(f"{name}: expected rank {rank} {inputs['shape']}, got shape "
                             f"{value.shape}")
        if shape is None:
            shape = value.shape
        elif value.shape != shape:
            raise ValueError(f"{name}: shape {value.shape} differs from input_word_ids' "
                             f"{shape}")
        bounds = inputs[name]
        if value.size and (value.min() < bounds["min"] or value.max() > bounds["max"]):
            raise ValueError(f"{name}: values must be in [{bounds['min']}, {bounds['max']}], "
                             f"got [{value.min()}, {value.max()}]")
    if shape[-1] > inputs["max_sequence_length"]:
        raise ValueError(f"input_word_ids: sequence of {shape[-1]} is longer than "
                         f"max_position_embeddings={inputs['max_sequence_length']}")
