"""`saved_model_cli` with the tensorflow-text ops registered.

TensorFlow's `saved_model_cli` imports only TensorFlow, so `run` (and the
"Concrete Functions" part of `show --all`) fails on an export with
"Op type not registered 'FastWordpieceTokenizeWithOffsets'". Importing
`tensorflow_text` registers those ops; this module does that and then hands
its arguments to TensorFlow's own tool, unchanged:

    python -m bert_tf.export.saved_model_cli show --all --dir exports/sst2/1
    python -m bert_tf.export.saved_model_cli run --dir exports/sst2/1 --tag_set serve \\
        --signature_def serving_default --input_exprs 'text=["a gorgeous film"]'

It depends on nothing else in bert_tf.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main():
    """Registers tensorflow-text's ops, then runs TensorFlow's saved_model_cli."""
    import tensorflow_text  # noqa: F401  (registers the custom ops)
    from tensorflow.python.tools import saved_model_cli

    sys.argv[0] = "saved_model_cli"
    saved_model_cli.main()


if __name__ == "__main__":
    main()
