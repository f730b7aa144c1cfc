"""`custom_gradient`: `tf.custom_gradient` whose traced graphs can be freed.

Inside a `tf.function`, `tf.custom_gradient` registers every call's backward
function in TensorFlow's process-wide gradient registry, which never drops an
entry. That function closes over tensors of the traced graph, so each trace of
a model built from `fast_ops` stayed in memory for the rest of the process:
about 65 MB per in-process BERT-tiny training run (its train and eval loops),
gigabytes over a sweep or a test session.

Here the traced graph owns the backward functions. The registry, which a
symbolic gradient across a function boundary and a SavedModel export with
custom gradients look up by name, keeps one small entry per call holding only
a weak reference to its backward function. When the graph is collected, so
are its backward functions; what remains registered is the name and that dead
weak reference.

Eager calls go to `tf.custom_gradient` unchanged: they record on the active
tapes only and register nothing.
"""

import functools
import itertools
import weakref
from collections.abc import Callable

import tensorflow as tf

# `record_operation` puts an op and its backward function on the active
# gradient tapes; `tf.custom_gradient` uses it the same way in graph mode.
from tensorflow.python.eager import record

# The traced graph's attribute that keeps its backward functions alive: {name: backward}.
_OWNED_BACKWARDS = "_bert_tf_custom_gradients"
_GRADIENT_NAME = "BertTfCustomGradient"
_call_ids = itertools.count()


def custom_gradient(f: Callable) -> Callable:
    """Decorates `f(*tensors) -> (result, grad_fn)` like `tf.custom_gradient`.

    Args:
      f: takes positional tensors (no keyword arguments, no variables read
        inside) and returns its result (a tensor or a nest of tensors) and
        `grad_fn(*result_gradients)`, which returns one gradient per input
        (a tensor, or a list or tuple of them).

    Returns:
      A function with `f`'s inputs and result, differentiated by `grad_fn`.
    """
    eager = tf.custom_gradient(f)

    @functools.wraps(f)
    def call(*inputs):
        if tf.executing_eagerly():
            return eager(*inputs)
        return _graph_call(f, inputs)

    return call


def _graph_call(f, inputs):
    inputs = [tf.convert_to_tensor(x) for x in inputs]
    result, grad_fn = f(*inputs)
    results = tf.nest.flatten(result)
    num_results = len(results)

    def backward(*output_gradients):
        # One gradient per output of the IdentityN below (results, then
        # inputs); returns one per input of it: none reaches the forward ops
        # that computed the results, `grad_fn`'s reach `f`'s inputs.
        input_gradients = grad_fn(*output_gradients[:num_results])
        if not isinstance(input_gradients, (list, tuple)):
            input_gradients = [input_gradients]
        return [None] * num_results + list(input_gradients)

    name = f"{_GRADIENT_NAME}-{next(_call_ids)}"
    graph = tf.compat.v1.get_default_graph()
    owned = getattr(graph, _OWNED_BACKWARDS, None)
    if owned is None:
        owned = {}
        setattr(graph, _OWNED_BACKWARDS, owned)
    owned[name] = backward
    _register(name, weakref.ref(backward))
    # The gradient of the identity's outputs is `backward`, for symbolic
    # gradients through the registry and for the tapes through the record.
    with graph.gradient_override_map({"IdentityN": name}):
        passed = tf.identity_n(results + inputs)
    record.record_operation(f.__name__, passed, results + inputs, backward)
    return tf.nest.pack_sequence_as(result, passed[:num_results])


def _register(name, weak_backward):
    """Registers `name`'s gradient as the backward function `weak_backward` refers to."""

    @tf.RegisterGradient(name)
    def registered(unused_op, *output_gradients):
        backward = weak_backward()
        if backward is None:
            raise RuntimeError(f"gradient {name} was asked for after its graph was freed")
        return backward(*output_gradients)
