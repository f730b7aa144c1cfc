"""Multi-head self-attention as in BERT, with a float32 softmax."""

import math

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from bert_tf.layers import fast_ops, sequence_ids
from bert_tf.layers.bert_dropout import BertDropout
from bert_tf.layers.inference_projections import (
    FloatProjection,
    Int8Projection,
    dense_projection,
)


@keras.saving.register_keras_serializable(package="bert_tf")
class BertSelfAttention(keras.layers.Layer):
    """Multi-head scaled dot-product self-attention.

    Separate query, key and value projections of [D, D] and an output
    projection of [D, D], each with a bias, so the kernels map one-to-one onto
    Google TF1 and Hugging Face checkpoints. Attention probabilities get
    dropout. The additive `attention_bias` ([B, 1, 1, T] or broadcastable to
    [B, N, S, T]) is added to the scores in float32, and the softmax is always
    computed in float32, whatever the mixed-precision policy.

    For speed the three input projections run as one [D, 3D] matmul on
    kernels concatenated at call time (the variables stay separate), and the
    1 / sqrt(H) scaling is folded into the query projection when it is a
    power of two (exact in any dtype; H = 64 in every BERT size), else
    applied to the float32 scores.

    Args:
      num_heads: attention heads N (`hidden_size` divisible by N).
      hidden_size: input and output width D.
      attention_dropout: dropout rate on the attention probabilities.
      initializer_range: stddev of the truncated-normal initializers.
      **kwargs: `keras.layers.Layer` arguments (`name`, `dtype`, ...).
    """

    def __init__(self, num_heads: int, hidden_size: int, attention_dropout: float = 0.1,
                 initializer_range: float = 0.02, **kwargs):
        super().__init__(**kwargs)
        if hidden_size % num_heads:
            raise ValueError(
                f"hidden_size ({hidden_size}) must be divisible by num_heads ({num_heads})")
        self.num_heads = num_heads
        self.hidden_size = hidden_size
        self.attention_dropout = attention_dropout
        self.initializer_range = initializer_range
        self.head_size = hidden_size // num_heads
        # {"qkv": projection, "output": projection or None, "softmax_scale": float}
        # while inference projections are on (see
        # `bert_tf.layers.inference_projections`), else None.
        self._inference = None

    def build(self, inputs_shape, attention_bias_shape=None):
        initializer = keras.initializers.TruncatedNormal(stddev=self.initializer_range)

        def projection(name):
            layer = keras.layers.Dense(
                self.hidden_size, kernel_initializer=initializer,
                dtype=self.dtype_policy, name=name)
            layer.build(inputs_shape)
            return layer

        self.query = projection("query")
        self.key = projection("key")
        self.value = projection("value")
        self.attention_output = projection("attention_output")
        self.probs_dropout = BertDropout(
            self.attention_dropout, dtype=self.dtype_policy, name="probs_dropout")
        self.built = True

    def _fused_qkv_weights(self):
        """The [D, 3D] kernel and [3D] bias of query | key | value, scale folded in."""
        scale = 1.0 / math.sqrt(self.head_size)
        query_scale = scale if math.log2(scale).is_integer() else 1.0
        kernels, biases = [], []
        for layer, factor in ((self.query, query_scale), (self.key, 1.0), (self.value, 1.0)):
            kernel = ops.cast(layer.kernel, self.compute_dtype)
            bias = ops.cast(layer.bias, self.compute_dtype)
            if factor != 1.0:
                kernel, bias = kernel * factor, bias * factor
            kernels.append(kernel)
            biases.append(bias)
        return (ops.concatenate(kernels, axis=1), ops.concatenate(biases, axis=0),
                scale / query_scale)

    def use_inference_projections(self, quantization=None,
                                  key_length: int | None = None) -> list[tf.Module]:
        """Projections made once from the weights, for inference; returns them.

        Float: the fused query|key|value kernel and bias (the query scale folded
        in, as in training). Int8: that kernel and the output projection as
        `Int8Projection`s (one scale per column, so the folded query scale costs
        no precision).

        Args:
          quantization: None or "int8".
          key_length: if set, keys and values are padded (masked) to this many
            positions in every call, so the sums over keys run over the same
            length whatever the input's; inputs must not be longer.
        """
        kernel, bias, softmax_scale = self._fused_qkv_weights()  # [D, 3D], [3D]
        kernel, bias = np.asarray(kernel, np.float32), np.asarray(bias, np.float32)
        if quantization == "int8":
            self._inference = {
                "qkv": Int8Projection(kernel, bias, name=f"{self.name}_qkv_int8"),
                "output": dense_projection(self.attention_output, f"{self.name}_output_int8"),
                "softmax_scale": softmax_scale, "key_length": key_length}
        else:
            self._inference = {
                "qkv": FloatProjection(kernel, bias, name=f"{self.name}_qkv"),
                "output": None, "softmax_scale": softmax_scale, "key_length": key_length}
        return [p for p in (self._inference["qkv"], self._inference["output"]) if p is not None]

    def use_training_projections(self):
        """Back to the layer's own variables."""
        self._inference = None

    def _project_qkv(self, flat_inputs):
        """[B * S, D] -> query|key|value [B * S, 3D] and the scale left for the scores."""
        if self._inference is not None:
            qkv = ops.cast(self._inference["qkv"](flat_inputs), self.compute_dtype)
            return qkv, self._inference["softmax_scale"]
        kernel, bias, softmax_scale = self._fused_qkv_weights()  # [D, 3D], [3D]
        # bias_add (not +) so the bias gradient is one BiasAddGrad kernel.
        return tf.nn.bias_add(ops.matmul(flat_inputs, kernel), bias), softmax_scale

    def call(self, inputs, attention_bias=None, training=None):
        batch, length = ops.shape(inputs)[0], ops.shape(inputs)[1]
        flat_inputs = ops.reshape(inputs, (-1, inputs.shape[-1]))  # [B * S, D]
        qkv, softmax_scale = self._project_qkv(flat_inputs)  # [B * S, 3D]
        qkv = ops.reshape(
            qkv, (batch, length, 3, self.num_heads, self.head_size))  # [B, S, 3, N, H]
        # One transpose for all three instead of one each.
        qkv = ops.transpose(qkv, (2, 0, 3, 1, 4))  # [3, B, N, S, H]
        # Unstack, not indexing: the gradient of three slices would be three
        # zero-filled [3, B, N, S, H] tensors summed.
        query, key, value = ops.unstack(qkv, 3, axis=0)  # [B, N, S, H], [B, N, T, H] x 2
        if self._inference is not None and self._inference["key_length"] is not None:
            key, value, attention_bias = _pad_keys(key, value, attention_bias,
                                                   self._inference["key_length"])
        # tf.matmul's transpose_b reads the keys in place; the einsum forms of
        # keras.ops (or a batched ops.matmul) would materialise a transpose.
        scores = tf.linalg.matmul(query, key, transpose_b=True)  # [B, N, S, T]
        bias_f32 = None if attention_bias is None else ops.cast(attention_bias, "float32")
        probs = fast_ops.attention_softmax(scores, bias_f32, softmax_scale)  # [B, N, S, T]
        probs = self.probs_dropout(probs, training=training)
        context = tf.linalg.matmul(probs, value)  # [B, N, S, H]
        context = ops.transpose(context, (0, 2, 1, 3))  # [B, S, N, H]
        context = ops.reshape(context, (-1, self.hidden_size))  # [B * S, D]
        if self._inference is None or self._inference["output"] is None:
            output = self.attention_output(context)  # [B * S, D]
        else:
            output = ops.cast(self._inference["output"](context), self.compute_dtype)
        return ops.reshape(output, (batch, length, self.hidden_size))  # [B, S, D]

    def compute_output_shape(self, inputs_shape, attention_bias_shape=None):
        return inputs_shape

    def get_config(self):
        config = super().get_config()
        config.update({
            "num_heads": self.num_heads,
            "hidden_size": self.hidden_size,
            "attention_dropout": self.attention_dropout,
            "initializer_range": self.initializer_range,
        })
        return config


def _pad_keys(key, value, attention_bias, key_length):
    """Keys and values [B, N, T, H] padded to `key_length` positions, masked in the bias.

    Float sums over keys (the softmax's, the probabilities times the values) are
    rounded differently for different numbers of keys, even where the extra keys
    are masked; int8 rounding can turn that last-bit difference into a whole
    quantization step. At one fixed length, a request's answer does not depend on
    how far its batch was padded.
    """
    padding = key_length - ops.shape(key)[2]
    pad_positions = [[0, 0], [0, 0], [0, padding], [0, 0]]
    bias = ops.cast(attention_bias, "float32")  # [B, 1, S, T]
    bias = tf.pad(bias, [[0, 0], [0, 0], [0, 0], [0, padding]],
                  constant_values=sequence_ids.MASK_BIAS)  # [B, 1, S, key_length]
    return tf.pad(key, pad_positions), tf.pad(value, pad_positions), bias
