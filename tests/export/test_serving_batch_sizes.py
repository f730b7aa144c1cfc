"""Serving inputs of different batch sizes are refused with an error naming both inputs.

Through real exports (the session's tiny models) loaded with `tf.saved_model.load`,
as TF Serving and any TensorFlow client load them.
"""

import pytest
import tensorflow as tf

from bert_tf.export import graph_ops, op_allowlist


@pytest.fixture(scope="module")
def serving(exports):
    """`serving(kind)`: the kind's `serving_default`, each export loaded once for the module.

    Loading a SavedModel retraces its functions; the tests only call the signature.
    """
    loaded = {}

    def serve(kind):
        if kind not in loaded:
            loaded[kind] = tf.saved_model.load(exports[kind][2])
        return loaded[kind].signatures["serving_default"]

    return serve


def _batch_error(first, first_size, second, second_size):
    """The pattern of the refusal: both names and both batch sizes."""
    return (rf"serving inputs {first} and {second} must have the same batch size; "
            rf"{first} has\] \[{first_size}\] \[rows, {second} has\] \[{second_size}\]")


@pytest.mark.parametrize("kind, inputs, message", [
    ("classifier",
     {"text": ["a cat", "a dog"], "text_pair": ["one", "two", "three"]},
     _batch_error("text", 2, "text_pair", 3)),
    ("classifier",
     {"text": ["a cat", "a dog", "a cow"], "text_pair": ["one"]},
     _batch_error("text", 3, "text_pair", 1)),
    ("span_labeler",
     {"question": ["Where?"], "context": ["In Paris.", "In Rome."]},
     _batch_error("question", 1, "context", 2)),
    ("multiple_choice",
     {"context": ["She opens the door.", "He sits."],
      "choices": [["She walks in.", "She flies.", "It sings."]]},
     _batch_error("context", 2, "choices", 1)),
])
def test_mismatched_batch_sizes_name_both_inputs(serving, kind, inputs, message):
    serve = serving(kind)
    with pytest.raises(tf.errors.InvalidArgumentError, match=message) as caught:
        serve(**{name: tf.constant(value) for name, value in inputs.items()})
    # The check runs before packing: the packer's own shape error never shows.
    assert "Incompatible shapes" not in str(caught.value)


@pytest.mark.parametrize("kind, inputs, outputs", [
    ("classifier", {"text": ["a cat", "a dog"], "text_pair": ["one", "two"]}, "label"),
    ("span_labeler", {"question": ["Where?"], "context": ["In Paris."]}, "answer"),
    ("multiple_choice", {"context": ["She opens the door."],
                         "choices": [["She walks in.", "She flies.", "It sings."]]}, "choice_id"),
    ("classifier", {"text": tf.zeros([0], tf.string), "text_pair": tf.zeros([0], tf.string)},
     "label"),
])
def test_equal_batch_sizes_still_serve(serving, kind, inputs, outputs):
    serve = serving(kind)
    result = serve(**{name: tf.constant(value) for name, value in inputs.items()})
    assert result[outputs].shape[0] == len(next(iter(inputs.values())))


def test_the_check_uses_only_ops_tf_serving_links(exports):
    for kind in ("classifier", "span_labeler", "multiple_choice"):
        path = exports[kind][2]
        op_allowlist.check_ops(graph_ops.saved_model_ops(path), source=path)
