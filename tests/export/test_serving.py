"""Signatures beyond serving_default, warm-up requests, metadata, Keras
TFSMLayer, the Python helper and mixed precision."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.checkpoints.task_record import TaskRecord
from bert_tf.export import export_model, load_export
from bert_tf.export.warmup import WARMUP_FILE
from tests.export.export_helpers import build_model


@pytest.fixture(scope="module")
def classifier(exports):
    model, info, path = exports["classifier"]
    return model, info, path, tf.saved_model.load(path)


def _ids(word_ids, type_ids=None, mask=None):
    word_ids = tf.constant(word_ids, tf.int32)
    type_ids = tf.zeros_like(word_ids) if type_ids is None else tf.constant(type_ids)
    mask = tf.ones_like(word_ids) if mask is None else tf.constant(mask)
    return {"input_word_ids": word_ids, "input_type_ids": type_ids, "input_mask": mask}


def test_serve_token_ids_matches_text(classifier):
    _, _, _, loaded = classifier
    # "hello world" / "bye": [CLS] hello world [SEP] bye [SEP] + padding to 32.
    ids = [101, 7592, 2088, 102, 9061, 102] + [0] * 26
    types = [0, 0, 0, 0, 1, 1] + [0] * 26
    mask = [1] * 6 + [0] * 26
    by_ids = loaded.signatures["serve_token_ids"](**_ids([ids], [types], [mask]))
    by_text = loaded.signatures["serving_default"](
        text=tf.constant(["Hello world"]), text_pair=tf.constant(["bye"]))
    np.testing.assert_allclose(by_ids["logits"].numpy(), by_text["logits"].numpy(), atol=1e-6)
    assert by_ids["label"].numpy().tolist() == by_text["label"].numpy().tolist()


@pytest.mark.parametrize("inputs, message", [
    (_ids([[101, 30522, 102]]), r"input_word_ids: ids must be in \[0, 30522\)"),
    (_ids([[101, -1, 102]]), r"input_word_ids: ids must be in \[0, 30522\)"),
    (_ids([[101, 7592, 102]], [[0, 2, 0]]), r"input_type_ids: ids must be in \[0, 2\)"),
    (_ids([[101, 7592, 102]], None, [[1, 1]]), "input_mask must have the shape of input_word_ids"),
    (_ids([[101] * 65]), "input_word_ids: sequence longer than max_position_embeddings=64"),
])
def test_serve_token_ids_rejects_bad_input(classifier, inputs, message):
    _, _, _, loaded = classifier
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        loaded.signatures["serve_token_ids"](**inputs)


def test_batch_of_64(classifier):
    _, _, _, loaded = classifier
    texts = [f"sentence number {i} " + "very " * (i % 20) + "long" for i in range(64)]
    out = loaded.signatures["serving_default"](
        text=tf.constant(texts), text_pair=tf.constant(texts[::-1]))
    assert out["logits"].shape == (64, 2) and out["label"].shape == (64,)
    encoded = loaded.signatures["encode"](text=tf.constant(texts))
    assert encoded["sequence_output"].shape == (64, 32, 32)
    # Row 19: "sentence number 19", 19 x "very", "long" = 23 pieces + [CLS] [SEP].
    assert encoded["padding_mask"].numpy()[19].sum() == 25


def test_warmup_requests_replay(classifier):
    from tensorflow_serving.apis import prediction_log_pb2

    _, info, path, loaded = classifier
    records = list(tf.data.TFRecordDataset(
        os.path.join(path, "assets.extra", WARMUP_FILE)).as_numpy_iterator())
    # Short samples at batch 1 and 2, then texts that fill max_seq_length.
    assert len(records) == 4
    for index, (batch_size, record) in enumerate(zip((1, 2, 1, 2), records)):
        request = prediction_log_pb2.PredictionLog.FromString(record).predict_log.request
        assert request.model_spec.signature_name == "serving_default"
        assert request.model_spec.name == "classifier"
        inputs = {k: tf.make_ndarray(v) for k, v in request.inputs.items()}
        assert sorted(inputs) == ["text", "text_pair"]
        words = len(inputs["text"][0].split())
        assert (words >= info.max_seq_length) == (index >= 2)
        out = loaded.signatures["serving_default"](**{k: tf.constant(v) for k, v in inputs.items()})
        assert out["logits"].shape == (batch_size, 2)


def test_export_metadata(classifier):
    _, info, path, _ = classifier
    with open(os.path.join(path, "assets.extra", "bert_tf_export.json")) as f:
        metadata = json.load(f)
    assert metadata["task_name"] == "mrpc"
    assert metadata["label_names"] == ["not_equivalent", "equivalent"]
    assert metadata["task"] == info.to_dict()
    assert metadata["encoder_config"]["hidden_size"] == 32
    assert metadata["tokenizer"]["special_token_ids"]["[CLS]"] == 101
    assert metadata["signatures"] == {
        "serving_default": ["text", "text_pair"], "encode": ["text"],
        "serve_token_ids": ["input_word_ids", "input_mask", "input_type_ids"]}


def test_tfsm_layer_in_a_keras_model(classifier):
    _, _, path, loaded = classifier
    text = keras.Input(shape=(), dtype="string", name="text")
    text_pair = keras.Input(shape=(), dtype="string", name="text_pair")
    served = keras.layers.TFSMLayer(path, call_endpoint="serving_default")(
        {"text": text, "text_pair": text_pair})
    wrapped = keras.Model([text, text_pair], served["probabilities"])
    texts = tf.constant(["Hello world", "Ünïcode ß"])
    pairs = tf.constant(["bye", ""])
    expected = loaded.signatures["serving_default"](text=texts, text_pair=pairs)
    got = wrapped([texts, pairs])
    np.testing.assert_allclose(np.asarray(got), expected["probabilities"].numpy(), atol=1e-6)


def test_load_export_predict(exports):
    _, _, path = exports["span_labeler"]
    exported = load_export(path)
    context = "Die Türme stehen in Paris."
    by_name = exported.predict(question=["Wo?"], context=[context])
    positional = exported.predict(["Wo?"], [context])
    assert by_name["answer"].tolist() == positional["answer"].tolist()
    start, end = by_name["start_char"][0], by_name["end_char"][0]
    assert by_name["answer"][0] == (context[start:end] if start >= 0 else "")
    with pytest.raises(TypeError, match=r"missing \['context'\]"):
        exported.predict(question=["Wo?"])


def test_mixed_precision_export_serves_float32(tokenizer, tmp_path):
    info = TaskRecord(kind="encoder", name="features", max_seq_length=8)
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        model = build_model("encoder", info)
    finally:
        keras.config.set_dtype_policy("float32")
    path = export_model(model, tokenizer, str(tmp_path / "bf16"), info)
    loaded = tf.saved_model.load(path)
    for name in ("serving_default", "encode"):
        out = loaded.signatures[name](text=tf.constant(["a b c"]))
        assert out["pooled_output"].dtype == tf.float32
        assert out["sequence_output"].dtype == tf.float32
