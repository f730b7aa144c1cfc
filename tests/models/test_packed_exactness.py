"""Packed rows are exact: each sequence of a packed row gets what it gets alone.

The encoder reads a packed row's sequence indices from `padding_mask`
(bert_tf.layers.sequence_ids). These tests run the same sequences packed
(three to a row) and unpacked (one per row) through the encoder and the
pretrainer, fp32 without dropout, and compare every per-sequence output and
the loss. The negative controls break one ingredient of packing at a time
and must be caught by the same comparison.
"""

import numpy as np
import pytest
from keras import ops

from bert_tf.layers import sequence_ids
from bert_tf.models import BertClassifier, BertEncoder, BertTokenClassifier
from bert_tf.models.bert_pretrainer import BertPretrainer
from bert_tf.models.encoder_config import EncoderConfig
from bert_tf.tasks.pretraining import PretrainingExperiment, PretrainingTask

TOLERANCE = 1e-5
SEQ = 48
CLS, SEP = 2, 3
CONFIG = EncoderConfig(vocab_size=120, hidden_size=32, num_layers=3, num_heads=4,
                       intermediate_size=64, max_position_embeddings=SEQ, hidden_dropout=0.0,
                       attention_dropout=0.0)
LENGTHS = (19, 11, 16)  # packed into one row of 48: 46 real tokens, 2 padding


def _sequence(rng, length):
    tokens = rng.integers(5, CONFIG.vocab_size, size=length).astype(np.int32)
    tokens[0], tokens[-1] = CLS, SEP
    split = length // 2
    tokens[split] = SEP
    segments = np.zeros(length, np.int32)
    segments[split + 1:] = 1
    masked = np.sort(rng.choice(np.arange(1, length - 1), size=3, replace=False))
    return tokens, segments, masked.astype(np.int32)


@pytest.fixture(scope="module")
def sequences():
    rng = np.random.default_rng(7)
    return [_sequence(rng, length) for length in LENGTHS]


def _unpacked(sequences):
    """One sequence per row: inputs [3, SEQ] and MLM positions [3, 3]."""
    batch = {name: np.zeros((len(sequences), SEQ), np.int32)
             for name in ("token_ids", "segment_ids", "padding_mask")}
    for row, (tokens, segments, _) in enumerate(sequences):
        batch["token_ids"][row, :len(tokens)] = tokens
        batch["segment_ids"][row, :len(tokens)] = segments
        batch["padding_mask"][row, :len(tokens)] = 1
    batch["masked_lm_positions"] = np.stack([masked for _, _, masked in sequences])
    return batch


def _packed(sequences, number_sequences=True):
    """All sequences in one row; `number_sequences=False` is the 0/1-mask control."""
    batch = {name: np.zeros((1, SEQ), np.int32)
             for name in ("token_ids", "segment_ids", "padding_mask")}
    starts, offset = [], 0
    for index, (tokens, segments, _) in enumerate(sequences, start=1):
        end = offset + len(tokens)
        batch["token_ids"][0, offset:end] = tokens
        batch["segment_ids"][0, offset:end] = segments
        batch["padding_mask"][0, offset:end] = index if number_sequences else 1
        starts.append(offset)
        offset = end
    batch["masked_lm_positions"] = np.concatenate(
        [masked + start for (_, _, masked), start in zip(sequences, starts)])[None]
    batch["cls_positions"] = np.array([starts], np.int32)
    return batch, starts


def _feed(model, batch):
    """The entries of `batch` that `model` takes (Keras matches extra keys by position)."""
    return {tensor.name: batch[tensor.name] for tensor in model.inputs}


def _encoder_outputs(encoder, batch):
    inputs = {key: batch[key] for key in ("token_ids", "segment_ids", "padding_mask")}
    outputs = encoder(inputs)
    return [layer.numpy() for layer in outputs["encoder_outputs"]]


def _encoder_error(encoder, sequences, packed_batch, starts):
    """Largest |packed - unpacked| over every layer's output of every real token."""
    alone = _encoder_outputs(encoder, _unpacked(sequences))
    together = _encoder_outputs(encoder, packed_batch)
    error = 0.0
    for row, ((tokens, _, _), start) in enumerate(zip(sequences, starts)):
        for layer_alone, layer_together in zip(alone, together):
            difference = (layer_together[0, start:start + len(tokens)]
                          - layer_alone[row, :len(tokens)])
            error = max(error, float(np.abs(difference).max()))
    return error


@pytest.fixture(scope="module")
def encoder():
    return BertEncoder.from_encoder_config(CONFIG)


def test_encoder_packed_equals_unpacked(encoder, sequences):
    packed, starts = _packed(sequences)
    assert _encoder_error(encoder, sequences, packed, starts) < TOLERANCE


def _bert_bias(ids):
    """BERT's unpacked mask [B, 1, 1, T]: every token sees every real token."""
    real = ops.cast(ops.minimum(ids, 1), "float32")
    return ops.expand_dims(ops.expand_dims((1.0 - real) * sequence_ids.MASK_BIAS, 1), 1)


def _absolute_positions(ids):
    """BERT's unpacked positions: 0 .. S-1 in every row."""
    return ops.broadcast_to(ops.arange(ops.shape(ids)[1], dtype="int32")[None],
                            ops.shape(ids))


def _encoder_with(monkeypatch, weights, bias=None, positions=None):
    """An encoder built with `bias` / `positions` in place of the packed ones."""
    if bias is not None:
        monkeypatch.setattr(sequence_ids, "attention_bias", bias)
    if positions is not None:
        monkeypatch.setattr(sequence_ids, "position_ids", positions)
    model = BertEncoder.from_encoder_config(CONFIG)
    model.set_weights(weights)
    return model


def test_unpacked_rows_are_encoded_exactly_as_by_bert(encoder, sequences, monkeypatch):
    """On 0/1 masks the packed formulas are BERT's own, padding outputs included."""
    batch = _unpacked(sequences)
    packing_aware = _encoder_outputs(encoder, batch)
    bert = _encoder_outputs(_encoder_with(monkeypatch, encoder.get_weights(), _bert_bias,
                                          _absolute_positions), batch)
    for ours, theirs in zip(packing_aware, bert):
        np.testing.assert_array_equal(ours, theirs)


def test_control_packing_without_sequence_numbers_fails(encoder, sequences):
    """A 0/1 mask over a packed row: neither block-diagonal nor restarting positions."""
    packed, starts = _packed(sequences, number_sequences=False)
    assert _encoder_error(encoder, sequences, packed, starts) > 100 * TOLERANCE


def test_control_without_block_diagonal_attention_fails(encoder, sequences, monkeypatch):
    model = _encoder_with(monkeypatch, encoder.get_weights(), bias=_bert_bias)
    packed, starts = _packed(sequences)
    assert _encoder_error(model, sequences, packed, starts) > 100 * TOLERANCE


def test_control_without_restarting_positions_fails(encoder, sequences, monkeypatch):
    model = _encoder_with(monkeypatch, encoder.get_weights(), positions=_absolute_positions)
    packed, starts = _packed(sequences)
    assert _encoder_error(model, sequences, packed, starts) > 100 * TOLERANCE


def test_pretrainer_heads_and_loss_packed_equal_unpacked(sequences):
    unpacked_model = BertPretrainer(BertEncoder.from_encoder_config(CONFIG))
    packed_model = BertPretrainer(BertEncoder.from_encoder_config(CONFIG), packed=True)
    packed_model.set_weights(unpacked_model.get_weights())
    alone = unpacked_model(_unpacked(sequences))
    packed_batch, _ = _packed(sequences)
    together = packed_model(packed_batch)

    mlm_alone = alone["mlm_logits"].numpy().reshape(-1, CONFIG.vocab_size)  # [3 * 3, V]
    mlm_together = together["mlm_logits"].numpy()[0]  # [9, V]
    np.testing.assert_allclose(mlm_together, mlm_alone, atol=TOLERANCE)
    np.testing.assert_allclose(together["nsp_logits"].numpy()[0], alone["nsp_logits"].numpy(),
                               atol=TOLERANCE)

    rng = np.random.default_rng(1)
    mlm_ids = rng.integers(5, CONFIG.vocab_size, size=(3, 3)).astype(np.int32)
    nsp_labels = np.array([0, 1, 1], np.int32)
    unpacked_labels = {"masked_lm_ids": mlm_ids, "masked_lm_weights": np.ones((3, 3), np.float32),
                       "next_sentence_labels": nsp_labels}
    # The packed row: one row, 9 predictions, 3 NSP slots (and an empty fourth).
    packed_labels = {"masked_lm_ids": mlm_ids.reshape(1, 9),
                     "masked_lm_weights": np.ones((1, 9), np.float32),
                     "next_sentence_labels": np.array([[0, 1, 1, 0]], np.int32),
                     "next_sentence_weights": np.array([[1, 1, 1, 0]], np.float32)}
    packed_batch["cls_positions"] = np.array([[0, 19, 30, 0]], np.int32)
    together = packed_model(packed_batch)
    task = PretrainingTask(PretrainingExperiment())

    def loss(labels, outputs, inputs):
        return float(task.compute_loss(labels, outputs, inputs,
                                       task.loss_denominators(labels))[0])

    assert loss(packed_labels, together, packed_batch) == pytest.approx(
        loss(unpacked_labels, alone, _unpacked(sequences)), abs=TOLERANCE)


@pytest.mark.parametrize("num_classes", [3, 1])
def test_classifier_logits_packed_equal_unpacked(sequences, num_classes):
    unpacked_model = BertClassifier(BertEncoder.from_encoder_config(CONFIG), num_classes,
                                    dropout=0.0)
    packed_model = BertClassifier(BertEncoder.from_encoder_config(CONFIG), num_classes,
                                  dropout=0.0, packed=True)
    packed_model.set_weights(unpacked_model.get_weights())
    packed_batch, _ = _packed(sequences)
    alone = unpacked_model(_feed(unpacked_model, _unpacked(sequences)))["logits"].numpy()
    together = packed_model(_feed(packed_model, packed_batch))["logits"].numpy()  # [1, 3, C]
    np.testing.assert_allclose(together[0], alone, atol=TOLERANCE)
    # Saved, the packed classifier is an ordinary one (same weights, plain rows).
    assert "packed" not in packed_model.get_config()


def test_token_classifier_logits_packed_equal_unpacked(sequences):
    model = BertTokenClassifier(BertEncoder.from_encoder_config(CONFIG), num_labels=5,
                                dropout=0.0)
    packed_batch, starts = _packed(sequences)
    alone = model(_feed(model, _unpacked(sequences)))["logits"].numpy()
    together = model(_feed(model, packed_batch))["logits"].numpy()
    for row, ((tokens, _, _), start) in enumerate(zip(sequences, starts)):
        np.testing.assert_allclose(together[0, start:start + len(tokens)],
                                   alone[row, :len(tokens)], atol=TOLERANCE)
