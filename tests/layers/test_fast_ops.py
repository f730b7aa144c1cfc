"""The hand-written-gradient ops match plain TensorFlow / Keras, values and gradients."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.layers import BertDropout, BertLayerNorm, fast_ops
from bert_tf.models import BertEncoder, BertPretrainer
from tests.helpers import TINY, layer_norm_case, max_abs_diff, random_inputs


def _value_and_grads(fn, inputs, upstream):
    with tf.GradientTape() as tape:
        tape.watch(inputs)
        y = fn(*inputs)
    return (y, *tape.gradient(y, inputs, output_gradients=upstream))


def test_layer_norm_matches_keras_values_and_gradients():
    (x, gamma, beta), dy = layer_norm_case()
    ours = _value_and_grads(lambda x, g, b: fast_ops.layer_norm(x, g, b, 1e-12),
                            [x, gamma, beta], dy)
    reference = _value_and_grads(
        lambda x, g, b: keras.ops.layer_normalization(x, g, b, epsilon=1e-12),
        [x, gamma, beta], dy)
    for a, b in zip(ours, reference):
        assert max_abs_diff(a, b) < 2e-5


def test_layer_norm_is_float32_inside_for_bfloat16_inputs():
    rng = np.random.default_rng(1)
    x32 = rng.normal(0.0, 2.0, (4, 32)).astype("float32")
    x = tf.cast(x32, tf.bfloat16)
    ones, zeros = tf.ones([32]), tf.zeros([32])
    y = fast_ops.layer_norm(x, ones, zeros, 1e-12)
    assert y.dtype == tf.bfloat16
    # Exact float32 statistics of the bfloat16 input, rounded once at the end.
    xf = np.asarray(tf.cast(x, tf.float32))
    expected = (xf - xf.mean(-1, keepdims=True)) / np.sqrt(xf.var(-1, keepdims=True) + 1e-12)
    assert max_abs_diff(tf.cast(y, tf.float32), expected) <= 2.0 ** -7 * np.abs(expected).max()


def test_bert_layer_norm_keeps_keras_variables():
    layer = BertLayerNorm(epsilon=1e-12, name="layer_norm")
    layer.build((None, 8))
    assert [v.path for v in layer.weights] == ["layer_norm/gamma", "layer_norm/beta"]
    assert isinstance(layer, keras.layers.LayerNormalization)
    x = np.random.default_rng(2).normal(size=(3, 8)).astype("float32")
    reference = keras.layers.LayerNormalization(epsilon=1e-12)
    reference.build((None, 8))
    assert max_abs_diff(layer(x), reference(x)) < 1e-5


def test_gelu_erf_matches_the_exact_formula_and_its_derivative():
    x = np.linspace(-8.0, 8.0, 2001).astype("float32")
    x64 = x.astype("float64")
    cdf = 0.5 * (1.0 + np.vectorize(math.erf)(x64 / math.sqrt(2.0)))
    expected_y = x64 * cdf
    expected_dy = cdf + x64 * np.exp(-0.5 * x64 ** 2) / math.sqrt(2.0 * math.pi)
    y, dx = _value_and_grads(fast_ops.gelu_erf, [tf.constant(x)], tf.ones_like(x))
    assert max_abs_diff(y, expected_y) < 1e-6
    assert max_abs_diff(dx, expected_dy) < 1e-6


def test_gelu_tanh_matches_keras():
    x = tf.constant(np.linspace(-8.0, 8.0, 2001), tf.float32)
    ours = _value_and_grads(fast_ops.gelu_tanh, [x], tf.ones_like(x))
    reference = _value_and_grads(lambda x: keras.ops.gelu(x, approximate=True), [x],
                                 tf.ones_like(x))
    for a, b in zip(ours, reference):
        assert max_abs_diff(a, b) < 1e-5


@pytest.mark.parametrize("scale", [1.0, 1.0 / math.sqrt(32.0)])
def test_attention_softmax_matches_autodiff(scale):
    rng = np.random.default_rng(3)
    scores = tf.constant(rng.normal(size=(2, 3, 4, 5)), tf.float32)
    bias = tf.constant(np.where(rng.random((2, 1, 1, 5)) < 0.3, -10000.0, 0.0), tf.float32)
    upstream = tf.constant(rng.normal(size=(2, 3, 4, 5)), tf.float32)
    ours = _value_and_grads(lambda s: fast_ops.attention_softmax(s, bias, scale),
                            [scores], upstream)
    reference = _value_and_grads(lambda s: tf.nn.softmax(s * scale + bias), [scores], upstream)
    for a, b in zip(ours, reference):
        assert max_abs_diff(a, b) < 1e-6


def test_sparse_softmax_cross_entropy_matches_tensorflow():
    rng = np.random.default_rng(4)
    logits = tf.constant(rng.normal(0.0, 5.0, (3, 4, 50)), tf.float32)
    labels = tf.constant(rng.integers(0, 50, (3, 4)), tf.int32)
    upstream = tf.constant(rng.random((3, 4)), tf.float32)
    ours = _value_and_grads(
        lambda z: fast_ops.sparse_softmax_cross_entropy(labels, z), [logits], upstream)
    reference = _value_and_grads(
        lambda z: tf.nn.sparse_softmax_cross_entropy_with_logits(labels, z), [logits], upstream)
    assert ours[0].shape == (3, 4)
    for a, b in zip(ours, reference):
        assert max_abs_diff(a, b) < 1e-5


def test_sparse_softmax_cross_entropy_when_the_label_probability_underflows():
    logits = tf.constant([[0.0, 300.0, -200.0, 5.0]], tf.float32)
    labels = tf.constant([2], tf.int32)
    ours = _value_and_grads(
        lambda z: fast_ops.sparse_softmax_cross_entropy(labels, z), [logits], tf.ones([1]))
    reference = _value_and_grads(
        lambda z: tf.nn.sparse_softmax_cross_entropy_with_logits(labels, z), [logits], tf.ones([1]))
    assert float(ours[0][0]) == pytest.approx(500.0)
    for a, b in zip(ours, reference):
        assert max_abs_diff(a, b) < 1e-4


@pytest.mark.parametrize("shape", [(1000, 1000), (333, 7)])
def test_dropout_rate_scale_and_gradient(shape):
    x = tf.ones(shape)
    seed = tf.constant([7, 11], tf.int64)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = fast_ops.dropout(x, 0.1, seed)
    dx = tape.gradient(y, x)
    kept = np.asarray(y) > 0
    scale = 65536.0 / (65536 - round(0.1 * 65536))
    assert np.allclose(np.asarray(y)[kept], scale)
    # The gradient is the same scaled mask.
    assert max_abs_diff(dx, y) == 0.0
    if shape == (1000, 1000):
        assert abs(kept.mean() - 0.9) < 0.002  # 1e6 draws: ~6.6 standard deviations
        assert abs(float(tf.reduce_mean(y)) - 1.0) < 0.003
        # No structure along rows or between neighbouring elements.
        flat = kept.ravel().astype("float64")
        assert abs(np.corrcoef(flat[:-1], flat[1:])[0, 1]) < 0.01
        assert abs(np.corrcoef(flat[:-4], flat[4:])[0, 1]) < 0.01


def test_dropout_is_a_function_of_the_seed():
    x = tf.ones([64, 64])
    a = fast_ops.dropout(x, 0.5, tf.constant([1, 2], tf.int64))
    b = fast_ops.dropout(x, 0.5, tf.constant([1, 2], tf.int64))
    c = fast_ops.dropout(x, 0.5, tf.constant([1, 3], tf.int64))
    assert max_abs_diff(a, b) == 0.0
    assert max_abs_diff(a, c) > 0.0


def test_bert_dropout_semantics_and_checkpointable_seed():
    layer = BertDropout(0.2, seed=5, name="dropout")
    x = tf.ones([50, 40])
    assert max_abs_diff(layer(x, training=False), x) == 0.0
    # The same single state variable as keras.layers.Dropout (Keras numbers
    # the seed generator's name when several exist in a process).
    keras_layer = keras.layers.Dropout(0.2, seed=5)
    assert [v.name for v in layer.variables] == [v.name for v in keras_layer.variables]
    assert [v.name for v in layer.variables] == ["seed_generator_state"]
    state = layer.variables[0].numpy()
    first = layer(x, training=True)
    second = layer(x, training=True)
    assert max_abs_diff(first, second) > 0.0  # a fresh mask per call
    layer.variables[0].assign(state)  # as a checkpoint restore would
    assert max_abs_diff(layer(x, training=True), first) == 0.0
    assert BertDropout(0.0)(x, training=True) is x
    assert float(tf.reduce_max(BertDropout(1.0)(x, training=True))) == 0.0


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_pretraining_step_compiles_with_xla(policy):
    # TPU and GPU training compiles the step; every op here must have an XLA kernel.
    model = BertPretrainer(BertEncoder.from_encoder_config(TINY, dtype=policy))
    inputs = {k: tf.constant(v) for k, v in random_inputs(batch=3, length=11,
                                                          pad_from=[7, 11, 9]).items()}
    inputs["masked_lm_positions"] = tf.constant([[1, 2], [3, 4], [5, 0]], tf.int32)
    labels = tf.constant([[5, 6], [7, 8], [9, 1]], tf.int32)

    def loss_and_grads():
        with tf.GradientTape() as tape:
            outputs = model(inputs, training=True)
            loss = tf.reduce_mean(fast_ops.sparse_softmax_cross_entropy(
                labels, outputs["mlm_logits"]))
        return loss, tape.gradient(loss, model.trainable_variables)

    loss, grads = tf.function(loss_and_grads, jit_compile=True)()
    assert np.isfinite(float(loss))
    # Everything but the pooler and NSP head (unused by this loss) gets a gradient.
    assert sum(g is None for g in grads) == 4
