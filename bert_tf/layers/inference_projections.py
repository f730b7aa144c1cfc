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

The int8 scheme is dynamic quantization, as ONNX Runtime's `quantize_dynamic`:
weights are int8, symmetric, one scale per output column (per channel), made
once from the float kernel; activations are quantized per call to uint8 over
their own [min, max] range. TensorFlow's `QuantizedMatMulWithBiasAndDequantize` (a core op with a
oneDNN kernel on x86-64) multiplies uint8 by int8 and returns float32. Its
asymmetric input mode (`MIN_FIRST`) gives wrong results for inputs with
negative values here, so the activation is shifted to start at zero and
quantized in `SCALED` mode, and the shift comes back through the bias:

    x @ W + b = (x - min(x)) @ W + (b + min(x) * column_sums(W))

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


class Int8Projection(tf.Module):
    """`x @ kernel + bias` with an int8 kernel (one scale per output column) and uint8 activations.

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
        quantized = np.clip(np.round(kernel / scale), -INT8_LIMIT, INT8_LIMIT).astype(np.int8)
        bias = np.zeros(kernel.shape[1], np.float32) if bias is None else np.asarray(bias)
        with self.name_scope:
            # int8 variables: TensorFlow cannot save variables of quantized dtypes.
            self.kernel = tf.Variable(quantized, trainable=False, name="kernel")
            # The op takes one weight range, so it multiplies in units of one int8 step
            # (range +-127) and the columns' scales come after; the bias and the column
            # sums are in those units too.
            self.column_scale = tf.Variable(scale, trainable=False, name="column_scale")
            self.column_sums = tf.Variable(quantized.astype(np.float32).sum(axis=0),
                                           trainable=False, name="column_sums")
            self.bias = tf.Variable((bias / scale).astype(np.float32), trainable=False,
                                    name="bias")

    def __call__(self, inputs: tf.Tensor) -> tf.Tensor:
        """[M, K] float (any float dtype) -> [M, N] float32."""
        inputs = tf.cast(inputs, tf.float32)
        low = tf.reduce_min(inputs)
        span = tf.maximum(tf.reduce_max(inputs) - low, _MIN_RANGE)
        activations = tf.raw_ops.QuantizeV2(
            input=inputs - low, min_range=0.0, max_range=span, T=tf.quint8, mode="SCALED")
        bias = self.bias + low * self.column_sums  # [N]: the shift, given back
        steps = tf.raw_ops.QuantizedMatMulWithBiasAndDequantize(
            a=activations.output, b=tf.bitcast(self.kernel, tf.qint8), bias=bias,
            min_a=activations.output_min, max_a=activations.output_max,
            min_b=-INT8_LIMIT, max_b=INT8_LIMIT,
            # Unused when the output is dequantized to float32.
            min_freezed_output=-1.0, max_freezed_output=1.0,
            Toutput=tf.float32, input_quant_mode="SCALED")
        return steps * self.column_scale


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
def inference_projections(encoder, quantization: str | None = None) -> Iterator[list]:
    """Runs every Transformer block of `encoder` on inference projections inside the context.

    Args:
      encoder: a built `BertEncoder` (a task model's `.encoder`).
      quantization: None (float, the fused QKV kernel precomputed) or "int8".

    Yields:
      the blocks' projections (`tf.Module`s whose variables an export saves).

    Raises:
      ValueError: `quantization` is not one of `QUANTIZATIONS`.
    """
    check_quantization(quantization)
    blocks = list(encoder.transformer_layers)
    projections = []
    try:
        for block in blocks:
            projections.extend(block.use_inference_projections(quantization))
        yield projections
    finally:
        for block in blocks:
            block.use_training_projections()
