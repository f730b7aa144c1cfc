"""Serves float and int8 exports in a process importing only tensorflow and tensorflow_text.

Usage: python int8_fresh_process.py REQUEST.json
REQUEST.json: {"exports": {name: path}, "texts": [...], "neighbours": [...],
               "signatures": [...] (default serving_default and encode),
               "outputs": [...] (default every float output)}

For every export: the text signatures on the texts one at a time ("alone")
and each text as row 0 of a batch with the neighbours ("batched"), and
`serve_token_ids` on fixed ids. Prints JSON: {name: {"alone": [...],
"batched": [...], "ids": {...}}} with each call's float outputs.
The caller sets TF_ENABLE_ONEDNN_OPTS; this process only reports what ran.
"""

import json
import sys

import tensorflow as tf
import tensorflow_text  # noqa: F401


def _floats(outputs, names=None):
    return {name: value.numpy().tolist() for name, value in sorted(outputs.items())
            if value.dtype.is_floating and (names is None or name in names)}


def serve(path, texts, neighbours, signature_names=("serving_default", "encode"),
          output_names=None):
    """The three ways of asking one export, as lists."""
    loaded = tf.saved_model.load(path)
    signatures = [loaded.signatures[name] for name in signature_names]

    def ask(batch):
        outputs = {}
        for signature in signatures:
            outputs.update(_floats(signature(text=tf.constant(batch)), output_names))
        return outputs

    def first_row(batch):
        return {name: value[0] for name, value in ask(batch).items()}

    alone = [first_row([text]) for text in texts]
    batched = [first_row([text] + neighbours) for text in texts]
    ids = _floats(loaded.signatures["serve_token_ids"](
        input_word_ids=tf.constant([[101, 2023, 2003, 1037, 3231, 102, 0, 0]]),
        input_mask=tf.constant([[1, 1, 1, 1, 1, 1, 0, 0]]),
        input_type_ids=tf.zeros([1, 8], tf.int32)), output_names)
    return {"alone": alone, "batched": batched, "ids": ids}


def main(request_path):
    with open(request_path, encoding="utf-8") as f:
        request = json.load(f)
    options = {"signature_names": request.get("signatures", ("serving_default", "encode")),
               "output_names": request.get("outputs")}
    print(json.dumps({name: serve(path, request["texts"], request["neighbours"], **options)
                      for name, path in request["exports"].items()}))


if __name__ == "__main__":
    main(sys.argv[1])
