"""Activation functions by the names BERT checkpoints use for them."""

import keras

from bert_tf.layers import fast_ops

# Names accepted for `hidden_act`. "gelu" is the exact (erf) form; the tanh
# approximation goes by several names in the wild.
EXACT_GELU_NAMES = ("gelu",)
TANH_GELU_NAMES = ("gelu_tanh", "gelu_new", "gelu_pytorch_tanh", "gelu_fast")
SUPPORTED_ACTIVATIONS = EXACT_GELU_NAMES + TANH_GELU_NAMES + ("relu",)


def gelu_exact(x):
    """GELU with the exact Gaussian CDF (erf): Hugging Face "gelu".

    Computed in float32 with a hand-written gradient (`fast_ops.gelu_erf`);
    Keras' version used erfc, several times slower on CPU.
    """
    return fast_ops.gelu_erf(x)


def gelu_tanh(x):
    """GELU with the tanh approximation: google-research/bert and Model Garden.

    Computed in float32 with a hand-written gradient (`fast_ops.gelu_tanh`).
    """
    return fast_ops.gelu_tanh(x)


def canonical_activation(name: str) -> str:
    """bert_tf's name for a checkpoint's `hidden_act`: "gelu_tanh" for every tanh GELU name.

    So a model read from a config that says "gelu_new" has the same config as the
    model that was written (Hugging Face's config names the tanh form "gelu_new").

    Args:
      name: a `hidden_act` from a checkpoint's config.
    """
    return "gelu_tanh" if name in TANH_GELU_NAMES else name


def get_activation(name):
    """Maps a checkpoint's `hidden_act` name to a function."""
    if name in EXACT_GELU_NAMES:
        return gelu_exact
    if name in TANH_GELU_NAMES:
        return gelu_tanh
    if name == "relu":
        return keras.activations.relu
    raise ValueError(
        f"unsupported activation {name!r}; expected one of "
        f"{SUPPORTED_ACTIVATIONS}")
