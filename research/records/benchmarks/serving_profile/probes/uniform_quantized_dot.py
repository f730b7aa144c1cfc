"""Stock TensorFlow's integer matmul kernels against float32 MatMul, at MiniLM's shapes.

    python research/records/benchmarks/serving_profile/probes/uniform_quantized_dot.py

Milliseconds per call (mean of 20 after 2 warm-ups) of [M, K] x [K, N]:
float32 `MatMul`; `UniformQuantizedDot` (int8 x int8 -> int32, per-channel weight
scales); `UniformQuantizedDotHybrid` (float32 x int8 -> float32). M is 32 (a batch-1
request of ~30 tokens) or 1024 (batch 32 of ~32 tokens). Run once with
TF_ENABLE_ONEDNN_OPTS=1 and once with =0; the output is in the .txt beside this file.
"""

import functools
import os
import platform
import time

import numpy as np
import tensorflow as tf


def milliseconds(function, calls=20):
    function()
    function()
    started = time.perf_counter()
    for _ in range(calls):
        function()
    return (time.perf_counter() - started) / calls * 1e3


@tf.function
def float_matmul(lhs, rhs):
    return tf.matmul(lhs, rhs)


@tf.function
def integer_dot(lhs_q, rhs_q, scales, zeros):
    return tf.raw_ops.UniformQuantizedDot(
        lhs=lhs_q, rhs=rhs_q, lhs_scales=0.01, lhs_zero_points=0, rhs_scales=scales,
        rhs_zero_points=zeros, output_scales=scales * 0.01, output_zero_points=zeros,
        Tout=tf.qint32, lhs_quantization_min_val=-128, lhs_quantization_max_val=127,
        rhs_quantization_min_val=-128, rhs_quantization_max_val=127,
        output_quantization_min_val=-2**31, output_quantization_max_val=2**31 - 1,
        rhs_quantization_axis=1, output_quantization_axis=1)


@tf.function
def hybrid_dot(lhs, rhs_q, scales, zeros):
    return tf.raw_ops.UniformQuantizedDotHybrid(
        lhs=lhs, rhs=rhs_q, rhs_scales=scales, rhs_zero_points=zeros, Tout=tf.float32,
        rhs_quantization_min_val=-128, rhs_quantization_max_val=127, rhs_quantization_axis=1)


def main():
    print(f"TF {tf.__version__}, TF_ENABLE_ONEDNN_OPTS={os.environ.get('TF_ENABLE_ONEDNN_OPTS')}, "
          f"{platform.processor() or platform.machine()}")
    rng = np.random.default_rng(0)
    for m in (32, 1024):
        for k, n in ((384, 384), (384, 1536), (1536, 384)):
            lhs = tf.constant(rng.normal(size=(m, k)).astype("float32"))
            rhs = tf.constant(rng.normal(size=(k, n)).astype("float32"))
            lhs_q = tf.cast(tf.constant(rng.integers(-127, 127, (m, k)), tf.int32), tf.qint8)
            rhs_q = tf.cast(tf.constant(rng.integers(-127, 127, (k, n)), tf.int32), tf.qint8)
            scales = tf.fill([n], 0.01)
            zeros = tf.zeros([n], tf.int32)
            contenders = {
                "float32": functools.partial(float_matmul, lhs, rhs),
                "int8": functools.partial(integer_dot, lhs_q, rhs_q, scales, zeros),
                "hybrid": functools.partial(hybrid_dot, lhs, rhs_q, scales, zeros)}
            times = {name: milliseconds(f) for name, f in contenders.items()}
            print(f"M={m} K={k} N={n}: " + ", ".join(
                f"{name} {ms:.2f} ms ({ms / times['float32']:.1f}x float)"
                for name, ms in times.items()), flush=True)


if __name__ == "__main__":
    main()
