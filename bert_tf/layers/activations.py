"""Activation functions by the names BERT checkpoints use for them."""

import keras
from keras import ops

from bert_tf.models import encoder_config


def gelu_exact(x):
    """GELU with the exact Gaussian CDF (erf): Hugging Face "gelu"."""
    return ops.gelu(x, approximate=False)


def gelu_tanh(x):
    """GELU with the tanh approximation: google-research/bert and Model Garden."""
    return ops.gelu(x, approximate=True)


def get_activation(name):
    """Maps a checkpoint's `hidden_act` name to a function."""
    if name in encoder_config.EXACT_GELU_NAMES:
        return gelu_exact
    if name in encoder_config.TANH_GELU_NAMES:
        return gelu_tanh
    if name == "relu":
        return keras.activations.relu
    raise ValueError(
        f"unsupported activation {name!r}; expected one of "
        f"{encoder_config.SUPPORTED_ACTIVATIONS}")
