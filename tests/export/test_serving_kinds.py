"""The serving-kind table: one entry per task kind, clear errors, and a new kind
exported and served through it."""

import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.checkpoints.task_record import TASK_KINDS, TaskRecord
from bert_tf.export import export_model, kinds
from bert_tf.export.serving_module import build_serving_module
from bert_tf.export.warmup import WARMUP_FILE
from tests.export.export_helpers import TASKS, build_model


def test_every_task_kind_has_a_serving_kind():
    assert sorted(kinds.SERVING_KINDS) == sorted(TASK_KINDS)
    assert all(kind.name == name for name, kind in kinds.SERVING_KINDS.items())
    # A pretrainer serves its encoder's outputs.
    assert type(kinds.SERVING_KINDS["pretrainer"]) is type(kinds.SERVING_KINDS["encoder"])


@pytest.mark.parametrize("record, names, shapes", [
    (TASKS["classifier"], ["text", "text_pair"], [[None], [None]]),
    (TASKS["regressor"], ["text"], [[None]]),
    (TASKS["span_labeler"], ["question", "context"], [[None], [None]]),
    (TASKS["token_classifier"], ["text"], [[None]]),
    (TASKS["multiple_choice"], ["context", "choices"], [[None], [None, 3]]),
    (TASKS["encoder"], ["text"], [[None]]),
])
def test_inputs_by_kind(record, names, shapes):
    kind = kinds.serving_kind(record.kind)
    specs = kind.text_inputs(record)
    assert [spec.name for spec in specs] == names
    assert [spec.shape.as_list() for spec in specs] == shapes
    assert all(spec.dtype == tf.string for spec in specs)
    assert sorted(kind.sample_inputs(record)) == sorted(names)


def test_unknown_kind_names_it_and_the_known_ones(tokenizer, monkeypatch):
    with pytest.raises(ValueError, match=r"unknown serving kind 'summariser'; expected one of "
                                         r"\('classifier', 'regressor', "):
        kinds.serving_kind("summariser")
    # The serving module reads the table: a kind missing from it cannot be exported.
    monkeypatch.delitem(kinds.SERVING_KINDS, "regressor")
    record = TASKS["regressor"]
    with pytest.raises(ValueError, match=r"unknown serving kind 'regressor'; expected one of "
                                         r"\(.*'span_labeler'"):
        build_serving_module(build_model("regressor", record), tokenizer, record)


def test_register_refuses_duplicates_and_non_kinds():
    with pytest.raises(ValueError, match="serving kind 'classifier' is registered already"):
        kinds.register_serving_kind(kinds.ClassifierKind("classifier"))
    with pytest.raises(TypeError, match="expected a ServingKind, got dict"):
        kinds.register_serving_kind({"name": "toy"})


class ConfidentClassifier(kinds.ClassifierKind):
    """A classifier variant that also serves the winning class's probability."""

    def postprocess(self, context, model_outputs, features):
        outputs = super().postprocess(context, model_outputs, features)
        outputs["confidence"] = tf.reduce_max(outputs["probabilities"], axis=-1)  # [B]
        return outputs

    def sample_inputs(self, record):
        return {"text": ["a toy warm-up request"]}


def test_a_new_kind_is_exported_and_served_through_the_table(tokenizer, tmp_path, monkeypatch):
    from tensorflow_serving.apis import prediction_log_pb2

    monkeypatch.setitem(kinds.SERVING_KINDS, "classifier", ConfidentClassifier("classifier"))
    record = TaskRecord(kind="classifier", name="toy", max_seq_length=16,
                        label_names=("no", "yes", "maybe"), text_inputs=1)
    model = build_model("classifier", record)
    path = export_model(model, tokenizer, str(tmp_path / "toy"), record)
    loaded = tf.saved_model.load(path)

    out = loaded.signatures["serving_default"](text=tf.constant(["good", "bad film ."]))
    probabilities = out["probabilities"].numpy()
    assert probabilities.shape == (2, 3)
    np.testing.assert_allclose(out["confidence"].numpy(), probabilities.max(-1), rtol=1e-6)
    assert [label.decode() for label in out["label"].numpy()] == [
        record.label_names[i] for i in probabilities.argmax(-1)]
    by_ids = loaded.signatures["serve_token_ids"](
        input_word_ids=tf.constant([[101, 2204, 102]]), input_mask=tf.ones([1, 3], tf.int32),
        input_type_ids=tf.zeros([1, 3], tf.int32))
    np.testing.assert_allclose(by_ids["confidence"].numpy(), out["confidence"].numpy()[:1],
                               rtol=1e-5)

    warmup = list(tf.data.TFRecordDataset(
        os.path.join(path, "assets.extra", WARMUP_FILE)).as_numpy_iterator())
    rows = [tf.make_ndarray(prediction_log_pb2.PredictionLog.FromString(r)
                            .predict_log.request.inputs["text"]).tolist() for r in warmup]
    # The kind's sample at batch 1 and 2, then the same words repeated to max_seq_length.
    full = b" ".join([b"a", b"toy", b"warm-up", b"request"] * 4)
    assert rows == [[b"a toy warm-up request"], [b"a toy warm-up request"] * 2, [full], [full] * 2]
