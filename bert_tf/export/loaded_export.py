"""`load_export`: an exported SavedModel, ready for prediction from Python."""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer's ops before loading)

from bert_tf import storage
from bert_tf.export.exporter import METADATA_FILE


class LoadedExport:
    """A loaded export: its signatures and `bert_tf_export.json` metadata.

    Args:
      path: an export version directory (`EXPORTS/NAME/<version>`).
    """

    def __init__(self, path: str):
        metadata_path = os.path.join(path, "assets.extra", METADATA_FILE)
        if not storage.isfile(metadata_path):
            raise FileNotFoundError(
                f"{metadata_path} not found: {path} is not a bert_tf export version directory")
        with storage.open(metadata_path, encoding="utf-8") as f:
            self.metadata = json.load(f)
        self.path = path
        self._saved_model = tf.saved_model.load(path)
        self.signatures = self._saved_model.signatures

    def input_names(self, signature: str = "serving_default") -> list[str]:
        """The input names of a signature, in `predict`'s positional order.

        Args:
          signature: "serving_default", "encode" or "serve_token_ids".
        """
        return self.metadata["signatures"][signature]

    def predict(self, *args: Any, signature: str = "serving_default",
                **inputs: Any) -> dict[str, np.ndarray]:
        """Runs a signature; returns {output name: numpy array}.

        String outputs are returned as arrays of Python `str`.

        Args:
          *args: inputs in the order of `input_names(signature)` (`text`,
            `text_pair`; `question`, `context`; `context`, `choices`).
          signature: the signature to run.
          **inputs: inputs by name, e.g. `text=[...]`.

        Raises:
          TypeError: naming the missing, unknown or surplus inputs.
        """
        names = self.input_names(signature)
        if len(args) > len(names):
            raise TypeError(f"{signature} takes {len(names)} inputs {names}, got {len(args)}")
        inputs.update(zip(names, args))
        missing = sorted(set(names) - set(inputs))
        unknown = sorted(set(inputs) - set(names))
        if missing or unknown:
            raise TypeError(
                f"{signature} takes inputs {names}; missing {missing}, unknown {unknown}")
        function = self.signatures[signature]
        specs = function.structured_input_signature[1]
        tensors = {name: tf.convert_to_tensor(value, dtype=specs[name].dtype)
                   for name, value in inputs.items()}
        outputs = function(**tensors)
        return {name: _to_numpy(value) for name, value in outputs.items()}


def _to_numpy(tensor):
    array = tensor.numpy()
    if tensor.dtype == tf.string:
        return np.vectorize(lambda b: b.decode("utf-8", "replace"), otypes=[object])(array) \
            if array.size else array.astype(object)
    return array


def load_export(path: str) -> LoadedExport:
    """Loads an export version directory for prediction (see `LoadedExport`).

    Args:
      path: an export version directory (`EXPORTS/NAME/<version>`), as
        written by `export_model` / `python -m bert_tf.export`.

    Raises:
      FileNotFoundError: `path` has no `assets.extra/bert_tf_export.json`.
    """
    return LoadedExport(path)
