"""The feature-based tagger: frozen encoder features, a BiLSTM and a classifier."""

import numpy as np
import pytest

from bert_tf.layers.feature_mix import MIXES, FeatureMix
from bert_tf.models import BertEncoder
from bert_tf.models.bert_feature_tagger import BertFeatureTagger


def _encoder():
    return BertEncoder(vocab_size=50, hidden_size=16, num_layers=5, num_heads=2,
                       intermediate_size=32, max_position_embeddings=32)


def _inputs():
    rng = np.random.default_rng(0)
    mask = np.array([[1] * 10 + [0] * 2, [1] * 12], "int32")
    return {"token_ids": rng.integers(1, 50, (2, 12)).astype("int32") * mask,
            "segment_ids": np.zeros((2, 12), "int32"), "padding_mask": mask}


@pytest.mark.parametrize("mix, width", [("embeddings", 16), ("second_to_last", 16),
                                        ("last", 16), ("sum_last_four", 16),
                                        ("concat_last_four", 64), ("sum_all", 16)])
def test_each_mix_reads_its_states(mix, width):
    encoder = _encoder()
    encoded = encoder(_inputs())
    states = [encoded["embedding_output"], *encoded["encoder_outputs"]]
    features = np.asarray(FeatureMix(mix)(states))
    assert features.shape == (2, 12, width)
    chosen = [np.asarray(s) for s in FeatureMix(mix).select(states)]
    expected = {"single": chosen[0], "concat": np.concatenate(chosen, -1),
                "weighted_sum": np.mean(chosen, axis=0)}[MIXES[mix][1]]
    # A fresh weighted sum is the plain mean (equal softmax weights).
    np.testing.assert_allclose(features, expected, atol=1e-5)
    if mix == "last":
        np.testing.assert_allclose(features, encoded["sequence_output"], atol=1e-6)
    if mix == "sum_all":
        # Every Transformer layer, not the embedding output (the paper's "all 12 layers").
        assert len(chosen) == len(encoded["encoder_outputs"])
        np.testing.assert_array_equal(chosen[0], np.asarray(encoded["encoder_outputs"][0]))


def test_only_the_head_trains_and_logits_cover_every_token():
    encoder = _encoder()
    model = BertFeatureTagger(encoder, num_labels=5, mix="sum_all", lstm_units=8)
    logits = model(_inputs())["logits"]
    assert tuple(logits.shape) == (2, 12, 5) and logits.dtype.name == "float32"
    trainable = {id(v) for v in model.trainable_variables}
    assert not trainable & {id(v) for v in encoder.variables}
    names = sorted(v.path for v in model.trainable_variables)
    assert any("state_logits" in n for n in names) and any("bilstm_1" in n for n in names)


def test_an_unknown_mix_is_refused_listing_the_mixes():
    with pytest.raises(ValueError, match="unknown feature mix 'top'; expected one of"):
        FeatureMix("top")


def test_layers_needed_by_each_mix():
    from bert_tf.layers.feature_mix import layers_needed

    assert {mix: layers_needed(mix) for mix in MIXES} == {
        "embeddings": 0, "second_to_last": 2, "last": 1, "sum_last_four": 4,
        "concat_last_four": 4, "sum_all": 1}


def test_the_frozen_encoder_runs_without_dropout_while_the_head_trains():
    # Heavy encoder dropout, none in the head: in training mode the logits may vary
    # only if the encoder's dropout is (wrongly) active.
    encoder = BertEncoder(vocab_size=50, hidden_size=16, num_layers=2, num_heads=2,
                          intermediate_size=32, max_position_embeddings=32,
                          hidden_dropout=0.5, attention_dropout=0.5)
    model = BertFeatureTagger(encoder, num_labels=3, mix="last", lstm_units=4, dropout=0.0)
    inputs = _inputs()
    first = np.asarray(model(inputs, training=True)["logits"])
    second = np.asarray(model(inputs, training=True)["logits"])
    np.testing.assert_allclose(first, second, atol=1e-6)
    np.testing.assert_allclose(first, np.asarray(model(inputs, training=False)["logits"]),
                               atol=1e-6)
