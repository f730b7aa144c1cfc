"""bert_tf: a TensorFlow/Keras 3 training stack for BERT.

The public entry points are importable lazily so that `import bert_tf` stays
cheap for command-line tools that only need part of the stack.
"""

from bert_tf.version import __version__

__all__ = ["__version__", "load_encoder", "load_preprocessor", "load_pretrainer"]


def __getattr__(name):
    # Lazy import: pulling in TensorFlow is slow, and command-line tools that
    # need only part of the stack should not pay for it.
    if name in ("load_encoder", "load_preprocessor", "load_pretrainer"):
        from bert_tf.checkpoints import loading

        return getattr(loading, name)
    raise AttributeError(f"module 'bert_tf' has no attribute {name!r}")
