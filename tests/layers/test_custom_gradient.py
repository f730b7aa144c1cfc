"""`custom_gradient` in traced graphs: the same gradients as eager, and graphs that can be freed."""

import gc
import weakref

import tensorflow as tf

from bert_tf.layers import fast_ops
from tests.helpers import layer_norm_case, max_abs_diff


def _norm_then_gelu(x, gamma, beta):
    return fast_ops.gelu_erf(fast_ops.layer_norm(x, gamma, beta, 1e-12))


def _gradients_with_tape_around(fn, inputs, upstream):
    with tf.GradientTape() as tape:
        tape.watch(inputs)
        y = fn(*inputs)
    return tape.gradient(y, inputs, output_gradients=upstream)


def test_graph_gradients_equal_eager_ones_inside_and_across_a_function():
    inputs, dy = layer_norm_case()
    eager = _gradients_with_tape_around(_norm_then_gelu, inputs, dy)
    # The tape inside the traced function: the gradient recorded on the tape.
    inside = tf.function(
        lambda *xs: _gradients_with_tape_around(_norm_then_gelu, list(xs), dy))(*inputs)
    # The tape outside: TensorFlow differentiates the traced graph symbolically,
    # through the registered gradient of each op.
    across = _gradients_with_tape_around(tf.function(_norm_then_gelu), inputs, dy)
    for a, b, c in zip(eager, inside, across):
        assert max_abs_diff(a, b) < 1e-6
        assert max_abs_diff(a, c) < 1e-6


def test_a_traced_graph_is_freed_once_its_function_is_gone():
    inputs, dy = layer_norm_case()

    @tf.function
    def step(*xs):
        return _gradients_with_tape_around(_norm_then_gelu, list(xs), dy)

    graph = weakref.ref(step.get_concrete_function(*inputs).graph)
    assert graph() is not None
    del step
    gc.collect()
    # tf.custom_gradient's gradient registry kept every such graph for the life of the process.
    assert graph() is None


def test_a_saved_function_keeps_its_custom_gradients(tmp_path):
    inputs, dy = layer_norm_case()
    module = tf.Module()
    module.norm_then_gelu = tf.function(
        _norm_then_gelu, input_signature=[tf.TensorSpec(x.shape, x.dtype) for x in inputs])
    # The default options save each op's custom gradient with the function.
    tf.saved_model.save(module, str(tmp_path))
    loaded = tf.saved_model.load(str(tmp_path))
    expected = _gradients_with_tape_around(_norm_then_gelu, inputs, dy)
    got = _gradients_with_tape_around(loaded.norm_then_gelu, inputs, dy)
    for a, b in zip(expected, got):
        assert max_abs_diff(a, b) < 1e-6
