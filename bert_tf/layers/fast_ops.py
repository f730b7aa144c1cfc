"""Train-step ops of BERT written for speed on CPU, same math as the plain ops.

Keras composes LayerNorm, GELU and a float32 softmax from many small ops, and
autodiff roughly doubles that count in the backward pass. On CPU every such
op is a full pass over a [B, S, D] (or [B, N, S, T]) tensor, and under mixed
precision many of them are casts. `layer_norm`, `gelu_erf`, `gelu_tanh`,
`attention_softmax` and `sparse_softmax_cross_entropy` compute the same
float32 math with far fewer passes: each has one `custom_gradient` whose
backward reuses the forward's float32 intermediates instead of re-deriving
them op by op. `dropout` draws its random mask with a cheaper generator.

They take and return tensors of the caller's compute dtype (float32,
bfloat16 or float16) and do their arithmetic in float32 either way. Every
op has an XLA kernel, so a compiled (TPU, GPU) step can use them too.
"""

import functools
import math

import tensorflow as tf

from bert_tf.layers.custom_gradient import custom_gradient

_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_TANH_CUBIC = 0.044715

# Dropout draws 16 random bits per element, four elements per 64-bit word.
_DROPOUT_BITS = 16
_DROPOUT_LEVELS = 1 << _DROPOUT_BITS
# SplitMix64's increment and finaliser (shift, multiplier) rounds.
_SPLITMIX_GAMMA = 0x9E3779B97F4A7C15
_SPLITMIX_ROUNDS = ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB))


def _name_scope(name):
    """Decorator: builds the (backward) function's ops under `name`, for profiles."""

    def decorate(fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with tf.name_scope(name):
                return fn(*args, **kwargs)

        return wrapped

    return decorate


def _to_float32(x):
    return x if x.dtype == tf.float32 else tf.cast(x, tf.float32)


def layer_norm(x, gamma, beta, epsilon):
    """LayerNorm over the last axis in float32; returns `x.dtype`.

    `gamma` and `beta` are float32 [D]. The backward pass is the closed form
    of LayerNorm's gradient, from the normalised input and 1 / stddev kept by
    the forward pass.
    """
    width = x.shape[-1]

    @custom_gradient
    def _layer_norm(x, gamma, beta):
        xf = _to_float32(x)
        mean = tf.reduce_mean(xf, axis=-1, keepdims=True)  # [..., 1]
        centered = xf - mean
        variance = tf.reduce_mean(tf.square(centered), axis=-1, keepdims=True)
        inv_std = tf.math.rsqrt(variance + epsilon)  # [..., 1]
        normalized = centered * inv_std
        y = tf.cast(normalized * gamma + beta, x.dtype)

        @_name_scope("layer_norm_grad")
        def grad(dy):
            dyf = _to_float32(dy)
            flat_dy = tf.reshape(dyf, [-1, width])  # [M, D]
            flat_dy_norm = tf.reshape(dyf * normalized, [-1, width])  # [M, D]
            # Column sums and row dot products with gamma as matrix-vector
            # products: one read of a [M, D] operand each, multi-threaded,
            # instead of a product pass plus a strided reduction.
            ones = tf.ones([1, tf.shape(flat_dy)[0]], tf.float32)  # [1, M]
            d_gamma = tf.reshape(tf.linalg.matmul(ones, flat_dy_norm), [width])
            d_beta = tf.reshape(tf.linalg.matmul(ones, flat_dy), [width])
            gamma_column = tf.reshape(gamma, [width, 1])
            # d_x = inv_std * (d_norm - mean(d_norm) - normalized * mean(d_norm * normalized))
            # with d_norm = dy * gamma.
            mean_d = tf.reshape(tf.linalg.matmul(flat_dy, gamma_column) / width, tf.shape(mean))
            mean_dn = tf.reshape(
                tf.linalg.matmul(flat_dy_norm, gamma_column) / width, tf.shape(mean))
            d_x = (dyf * gamma - mean_d - normalized * mean_dn) * inv_std
            return tf.cast(d_x, x.dtype), d_gamma, d_beta

        return y, grad

    return _layer_norm(x, gamma, beta)


@custom_gradient
def gelu_erf(x):
    """Exact GELU, x * Phi(x) with Phi(x) = (1 + erf(x / sqrt(2))) / 2, in float32.

    `erf` rather than `erfc`: TensorFlow's CPU erfc is several times slower
    (and far slower still in bfloat16). The derivative Phi(x) + x * phi(x)
    is computed in the forward pass, while its float32 inputs are at hand,
    and kept in the compute dtype, so the backward pass is one product.
    """
    xf = _to_float32(x)
    scaled = xf * _SQRT_HALF
    cdf = 0.5 * (1.0 + tf.math.erf(scaled))
    y = tf.cast(xf * cdf, x.dtype)
    # phi(x) = exp(-x^2 / 2) / sqrt(2 pi) = exp(-scaled^2) / sqrt(2 pi).
    derivative = tf.cast(cdf + (_INV_SQRT_2PI * xf) * tf.exp(-tf.square(scaled)), x.dtype)

    @_name_scope("gelu_grad")
    def grad(dy):
        return dy * derivative

    return y, grad


@custom_gradient
def gelu_tanh(x):
    """tanh-approximate GELU, x * (1 + tanh(u)) / 2 with u = sqrt(2 / pi) (x + 0.044715 x^3).

    The form of google-research/bert and Model Garden, in float32. As in
    `gelu_erf`, the derivative (1 + t) / 2 + x (1 - t^2) du/dx / 2 is formed
    in the forward pass and kept in the compute dtype.
    """
    xf = _to_float32(x)
    x_squared = tf.square(xf)
    tanh_u = tf.tanh(_SQRT_2_OVER_PI * xf * (1.0 + _GELU_TANH_CUBIC * x_squared))
    half_one_plus_t = 0.5 * (1.0 + tanh_u)
    y = tf.cast(xf * half_one_plus_t, x.dtype)
    du_dx = _SQRT_2_OVER_PI * (1.0 + 3.0 * _GELU_TANH_CUBIC * x_squared)
    derivative = tf.cast(
        half_one_plus_t + (0.5 * xf) * (1.0 - tf.square(tanh_u)) * du_dx, x.dtype)

    @_name_scope("gelu_grad")
    def grad(dy):
        return dy * derivative

    return y, grad


def attention_softmax(scores, attention_bias=None, scale=1.0):
    """softmax(scores * scale + attention_bias) over the last axis, in float32.

    `scores` [B, N, S, T] in the compute dtype, `attention_bias` float32
    broadcastable to it (e.g. [B, 1, 1, T]); returns probabilities in the
    dtype of `scores`. The backward pass is the softmax Jacobian-vector
    product p * (g - sum(g * p)) from the saved float32 probabilities.
    """
    if attention_bias is None:
        attention_bias = tf.zeros([], tf.float32)

    @custom_gradient
    def _softmax(scores):
        logits = _to_float32(scores)
        if scale != 1.0:
            logits = logits * scale
        probs = tf.nn.softmax(logits + attention_bias, axis=-1)  # float32

        @_name_scope("attention_softmax_grad")
        def grad(d_probs):
            d_probs = _to_float32(d_probs)
            d_logits = probs * (d_probs - tf.reduce_sum(d_probs * probs, axis=-1,
                                                        keepdims=True))
            if scale != 1.0:
                d_logits = d_logits * scale
            return tf.cast(d_logits, scores.dtype)

        return tf.cast(probs, scores.dtype), grad

    return _softmax(scores)


def _splitmix64_bits(count, seed):
    """`count` pseudo-random uint64 words: SplitMix64 keyed by a Philox draw from `seed`.

    SplitMix64 (Steele, Lea & Flood, 2014; Java's SplittableRandom, passes
    BigCrush) is word i = mix(key + (i + 1) * golden gamma), a handful of
    integer ops per word. TensorFlow's CPU Philox kernel takes about 3 ns
    per 32-bit word; these passes produce the same number of bits in less
    than half the time (single-threaded: 1.2 ms against 3.0 ms for 4 MB).
    The 64-bit key is one small stateless Philox draw from `seed`, so the
    stream is still a function of the seed alone.
    """
    key = tf.bitcast(tf.random.stateless_uniform(
        [2], seed=seed, minval=None, maxval=None, dtype=tf.uint32), tf.uint64)  # []
    counter = tf.bitcast(tf.range(1, count + 1, dtype=tf.int64), tf.uint64)  # [count]
    z = counter * tf.constant(_SPLITMIX_GAMMA, tf.uint64) + key
    for shift, multiplier in _SPLITMIX_ROUNDS:
        z = tf.bitwise.bitwise_xor(z, tf.bitwise.right_shift(z, tf.constant(shift, tf.uint64)))
        z = z * tf.constant(multiplier, tf.uint64)
    return tf.bitwise.bitwise_xor(z, tf.bitwise.right_shift(z, tf.constant(31, tf.uint64)))


def dropout(x, rate, seed):
    """Inverted dropout of `x` with `rate`, keyed by a stateless `seed` ([2] ints).

    Each element gets 16 random bits (`_splitmix64_bits`, four elements per
    64-bit word); it is kept when they are >= round(rate * 2**16), so the
    rate is exact to 2**-17 (0.1 is applied as 0.100006), and kept elements
    are scaled by the inverse of the realised keep probability, so the
    expectation of the output is `x`. The gradient (autodiff of a product
    with a constant) is the same mask.
    """
    threshold = int(round(rate * _DROPOUT_LEVELS))
    threshold = min(max(threshold, 1), _DROPOUT_LEVELS - 1)
    scale = _DROPOUT_LEVELS / (_DROPOUT_LEVELS - threshold)
    size = tf.size(x)
    bits = _splitmix64_bits((size + 3) // 4, seed)
    bits = tf.reshape(tf.bitcast(bits, tf.uint16), [-1])  # [4 * ceil(size / 4)]
    if x.shape.num_elements() is None or x.shape.num_elements() % 4:
        bits = bits[:size]
    keep = tf.reshape(bits, tf.shape(x)) >= tf.constant(threshold, tf.uint16)
    mask = tf.cast(keep, x.dtype) * tf.constant(scale, x.dtype)
    return x * mask


def sparse_softmax_cross_entropy(labels, logits):
    """Per-example softmax cross-entropy of float32 `logits` [..., V] at int `labels` [...].

    Same values as `tf.nn.sparse_softmax_cross_entropy_with_logits`, whose
    single fused CPU kernel took twice as long on BERT's MLM logits
    ([B * P, 30522]). The probabilities come from one `tf.nn.softmax` (a
    oneDNN kernel on CPU); the loss log-sum-exp(x) - x[label] takes the
    log-sum-exp from the row's most likely class, lse = x[top] - log p[top],
    where p[top] >= 1 / V cannot underflow, so even a label whose probability
    underflows to 0 gets its exact, finite loss. The backward pass is
    p - one_hot(labels), times the upstream gradient.
    """
    logits = tf.convert_to_tensor(logits)
    num_classes = tf.shape(logits)[-1]
    flat_logits = tf.reshape(logits, [-1, num_classes])  # [M, V]
    flat_labels = tf.reshape(tf.cast(labels, tf.int32), [-1])  # [M]
    rows = tf.range(tf.size(flat_labels))  # [M]
    label_indices = tf.stack([rows, flat_labels], axis=1)  # [M, 2]

    @custom_gradient
    def _xent(flat_logits):
        probs = tf.nn.softmax(flat_logits, axis=-1)  # [M, V]
        top = tf.stack([rows, tf.argmax(probs, axis=-1, output_type=tf.int32)], axis=1)  # [M, 2]
        log_sum_exp = tf.gather_nd(flat_logits, top) - tf.math.log(tf.gather_nd(probs, top))
        loss = log_sum_exp - tf.gather_nd(flat_logits, label_indices)  # [M]

        @_name_scope("cross_entropy_grad")
        def grad(d_loss):
            d_logits = probs * d_loss[:, None]  # [M, V]
            return tf.tensor_scatter_nd_sub(d_logits, label_indices, d_loss)

        return loss, grad

    return tf.reshape(_xent(flat_logits), tf.shape(labels))
