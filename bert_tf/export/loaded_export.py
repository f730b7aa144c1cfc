"""`load_export`: an exported SavedModel, ready for prediction from Python."""

import json
import os

import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer's ops before loading)

from bert_tf.export.exporter import METADATA_FILE


class LoadedExport:
    """A loaded export: its signatures and `bert_tf_export.json` metadata.

    Args:
      path: an export version directory (`EXPORTS/NAME/<version>`).
    """

    def __init__(self, path):
        metadata_path = os.path.join(path, "assets.extra", METADATA_FILE)
        if not os.path.isfile(metadata_path):
            raise FileNotFoundError(
                f"{metadata_path} not found: {path} is not a bert_tf export version directory")
        with open(metadata_path, encoding="utf-8") as f:
            self.metadata = json.load(f)
        self.path = path
        self._saved_model = tf.saved_model.load(path)
        self.signatures = self._saved_model.signatures

    def input_names(self, signature="serving_default"):
        """The input names of a signature, in `predict`'s positional order."""
        return self.metadata["signatures"][signature]

    def predict(self, *args, signature="serving_default", **inputs):
        """Runs a signature; returns {output name: numpy array}.

        Inputs are given by name (`text=[...]`) or positionally in the order
        of `input_names(signature)` (`text`, `text_pair`; `question`,
        `context`; `context`, `choices`). String outputs are
        returned as arrays of Python `str`.
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


def load_export(path):
    """Loads an export version directory for prediction (see `LoadedExport`)."""
    return LoadedExport(path)
