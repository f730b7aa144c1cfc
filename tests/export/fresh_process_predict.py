"""Runs every export's `serving_default` in a process importing only
tensorflow and tensorflow_text; prints the outputs as JSON.

Usage: python fresh_process_predict.py REQUEST.json
REQUEST.json: {"exports": {kind: path}, "inputs": {kind: {name: nested list}},
               "empty": {kind: {name: [0, ...] shape}}}
"""

import json
import sys

import tensorflow as tf
import tensorflow_text  # noqa: F401


def _plain(value):
    value = value.numpy()
    if value.dtype == object:
        return [[b.decode("utf-8") for b in row] if value.ndim == 2 else row.decode("utf-8")
                for row in value]
    return value.tolist()


def main(path):
    with open(path, encoding="utf-8") as f:
        request = json.load(f)
    result = {"modules": sorted(name for name in sys.modules
                                if name.split(".")[0] == "bert_tf")}
    for kind, export_path in request["exports"].items():
        signature = tf.saved_model.load(export_path).signatures["serving_default"]
        inputs = {name: tf.constant(value, tf.string)
                  for name, value in request["inputs"][kind].items()}
        result[kind] = {name: _plain(value) for name, value in signature(**inputs).items()}
        empty = {name: tf.zeros(shape, tf.string)
                 for name, shape in request["empty"][kind].items()}
        result[kind + "/empty"] = {name: list(value.shape)
                                   for name, value in signature(**empty).items()}
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1])
