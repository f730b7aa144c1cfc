"""Inference-only projections of the encoder: precomputed float kernels, or int8 matmuls.

`inference_projections(encoder, quantization)` switches every Transformer
block of a built encoder to projections made once from its weights, while the
context is open: functions traced inside it (an export's serving signatures)
keep them, the layers' own variables are untouched, and the encoder trains
and predicts as before on exit.

- float (`quantization=None`): the query, key and value kernels concatenated
  once (training concatenates them at every call, so that the gradient reaches
  the three variables; at batch 1 that copy was the second-largest op of a request).
- int8 (`quantization="int8"`): every projection of the block as an int8
  matmul (`Int8Projection`).

The int8 scheme: weights are int8, symmetric, one scale per output column (per
channel), made once from the float kernel; activations are quantized at every
call to uint8 with one range per row, that is per token, over the row's own
[min, max]. A token's codes depend on that token alone, and the integer
products are exact. One more thing ties an answer to its batch: the float sums
over attention keys are rounded differently for different padded lengths
(masked keys included), and rounding to int8 can turn such a last-bit
difference into a whole quantization step, which then grows through the layers
(on MiniLM, to as much as int8's own error). So int8 attention always runs
over `max_seq_length` keys, the extra ones masked: then a request's answer
does not change with its batch-mates (a long neighbour, a batch of 32) beyond
float rounding after the last int8 step. ONNX Runtime's dynamic int8 takes one
range over the whole input tensor, padding included, so there the same text
scores differently alone and batched.

The matmul is TensorFlow's `QuantizedMatMul` (uint8 x uint8 -> int32), whose
stock CPU kernel (gemmlowp) is registered in every TensorFlow build, TF
Serving's included, with oneDNN's graph rewrite on or off. (The fused
`QuantizedMatMulWithBiasAndDequantize` has only a placeholder kernel that the
oneDNN rewrite replaces: with the rewrite off, the TensorFlow default on CPUs
without AVX512-VNNI, AVX512-BF16, AVX-VNNI or AMX, it fails at every request.)
The weights are stored as uint8 codes with zero point 128; each row is
shifted to start at zero before it is quantized, and the shift comes back
through the column sums:

    x[r] @ W = step[r] * (codes[r] @ Wq) * scale + low[r] * (sum_k Wq[k] * scale)

where codes[r] = round((x[r] - low[r]) / step[r]) and Wq = W / scale in int8.

What stays float: embeddings, LayerNorm, attention scores and softmax, the
pooler and every task head (small next to the block projections).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import tensorflow as tf

# Symmetric int8: [-127, 127], so the scale maps max|W| to 127 exactly.
INT8_LIMIT = 127.0
# A constant activation (max == min) still needs a positive range.
_MIN_RANGE = 1e-6
# uint8 codes run 0..255; the weights' zero point sits in the middle.
_CODES = 255.0
_WEIGHT_ZERO_POINT = 128.0


class Int8Projection(tf.Module):
    """`x @ kernel + bias`: int8 kernel (one scale per column), uint8 rows (one range each).

    Args:
      kernel: float [K, N] weights.
      bias: float [N], or None for zeros.
      name: the module's name (its variables are named after it).
    """

    def __init__(self, kernel: np.ndarray, bias: np.ndarray | None = None, name: str = "int8"):
        super().__init__(name=name)
        kernel = np.asarray(kernel, np.float32)
        if kernel.ndim != 2:
            raise ValueError(f"{name}: kernel must be [K, N], got shape {kernel.shape}")
        max_abs = np.abs(kernel).max(axis=0)  # [N]
        scale = (np.where(max_abs > 0, max_abs, 1.0) / INT8_LIMIT).astype(np.float32)  # [N]
        quantized = np.clip(np.round(kernel / scale), -INT8_LIMIT, INT8_LIMIT)  # [K, N]
        bias = np.zeros(kernel.shape[1], np.float32) if bias is None else np.asarray(bias)
        with self.name_scope:
            # uint8 codes, zero point 128: the matmul's weight range [-128, 127] makes one
            # code one int8 step. (TensorFlow cannot save variables of quantized dtypes.)
            self.kernel = tf.Variable((quantized + _WEIGHT_ZERO_POINT).astype(np.uint8),
                                      trainable=False, name="kernel")
            self.column_scale = tf.Variable(scale, trainable=False, name="column_scale")
            # What one unit of a row's shift adds to each output column.
            self.column_sums = tf.Variable((quantized.sum(axis=0) * scale).astype(np.float32),
                                           trainable=False, name="column_sums")
            self.bias = tf.Variable(bias.astype(np.float32), trainable=False, name="bias")

    def __call__(self, inputs: tf.Tensor) -> tf.Tensor:
        """[M, K] float (any float dtype) -> [M, N] float32."""
        inputs = tf.cast(inputs, tf.float32)
        low = tf.reduce_min(inputs, axis=1, keepdims=True)  # [M, 1]
        span = tf.maximum(tf.reduce_max(inputs, axis=1) - low[:, 0], _MIN_RANGE)  # [M]
        codes = tf.raw_ops.QuantizeV2(
            input=inputs - low, min_range=tf.zeros_like(span), max_range=span, T=tf.quint8,
            mode="SCALED", axis=0, ensure_minimum_range=0.0).output  # [M, K]
        products = tf.raw_ops.QuantizedMatMul(
            a=codes, b=tf.bitcast(self.kernel, tf.quint8),
            min_a=0.0, max_a=_CODES, min_b=-_WEIGHT_ZERO_POINT, max_b=_CODES - _WEIGHT_ZERO_POINT,
            Toutput=tf.qint32).out  # [M, N], exact integers
        products = tf.cast(tf.bitcast(products, tf.int32), tf.float32)
        step = span[:, None] / _CODES  # [M, 1]
        return step * (products * self.column_scale) + (low * self.column_sums + self.bias)


def dense_projection(dense, name: str) -> Int8Projection:
    """The `Int8Projection` of a built `keras.layers.Dense` (its activation not included).

    Args:
      dense: the float layer.
      name: the projection's name.
    """
    bias = dense.bias.numpy() if dense.use_bias else None
    return Int8Projection(dense.kernel.numpy(), bias, name=name)


class FloatProjection(tf.Module):
    """`x @ kernel + bias` on fixed float32 weights, computed in the inputs' dtype.

    Args:
      kernel: float [K, N] weights.
      bias: float [N].
      name: the module's name.
    """

    def __init__(self, kernel: np.ndarray, bias: np.ndarray, name: str = "projection"):
        super().__init__(name=name)
        with self.name_scope:
            self.kernel = tf.Variable(np.asarray(kernel, np.float32), trainable=False,
                                      name="kernel")
            self.bias = tf.Variable(np.asarray(bias, np.float32), trainable=False, name="bias")

    def __call__(self, inputs: tf.Tensor) -> tf.Tensor:
        """[M, K] -> [M, N] in the dtype of `inputs`."""
        kernel = tf.cast(self.kernel, inputs.dtype)
        return tf.nn.bias_add(tf.linalg.matmul(inputs, kernel), tf.cast(self.bias, inputs.dtype))


QUANTIZATIONS = (None, "int8")


def check_quantization(quantization: str | None) -> None:
    """Raises ValueError unless `quantization` is one of `QUANTIZATIONS`."""
    if quantization not in QUANTIZATIONS:
        raise ValueError(f"quantization {quantization!r}: expected one of {QUANTIZATIONS}")


@contextlib.contextmanager
def inference_projections(encoder, quantization: str | None = None,
                          max_seq_length: int | None = None) -> Iterator[list]:
    """Runs every Transformer block of `encoder` on inference projections inside the context.

    Args:
      encoder: a built `BertEncoder` (a task model's `.encoder`).
      quantization: None (float, the fused QKV kernel precomputed) or "int8".
      max_seq_length: int8 only, and required there: the longest input the
        traced functions accept. The attention runs over that many keys in every
        call (the extra ones masked), so that a request's int8 answer does not
        depend on how far its batch was padded (see the module docstring).

    Yields:
      the blocks' projections (`tf.Module`s whose variables an export saves).

    Raises:
      ValueError: `quantization` is not one of `QUANTIZATIONS`.
    """
    check_quantization(quantization)
    if quantization == "int8" and max_seq_length is None:
        raise ValueError("int8 inference projections need max_seq_length (the longest input)")
    key_length = max_seq_length if quantization == "int8" else None
    blocks = list(encoder.transformer_layers)
    projections = []
    try:
        for block in blocks:
            projections.extend(block.use_inference_projections(quantization, key_length))
        yield projections
    finally:
        for block in blocks:
            block.use_training_projections()
