"""Tests of packing (bert_tf.data.packing) and the packed pretraining pipeline."""

import functools
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data import packing, pretraining
from bert_tf.text.tokenizer import BertTokenizer
from tests import shared_data
from tests.helpers import require

SEQ = 128


def _first_fit_reference(lengths, capacity, max_per_row):
    """First-fit in plain Python: (row, slot, offset) of each length."""
    free, taken, placed = [], [], []
    for length in lengths:
        for row, room in enumerate(free):
            if room >= length and taken[row] < max_per_row:
                break
        else:
            row = len(free)
            free.append(capacity)
            taken.append(0)
        placed.append((row, taken[row], capacity - free[row]))
        free[row] -= length
        taken[row] += 1
    return placed


@pytest.mark.parametrize("max_per_row", [1, 2, 3])
def test_first_fit_matches_the_textbook_rule(max_per_row):
    lengths = np.random.default_rng(max_per_row).integers(1, SEQ + 1, size=200)
    row, slot, offset = packing.first_fit(lengths, SEQ, max_per_row)
    assert list(zip(row.numpy(), slot.numpy(), offset.numpy())) == _first_fit_reference(
        lengths, SEQ, max_per_row)


def test_options_and_buffer_size_are_checked():
    with pytest.raises(ValueError, match="max_sequences_per_row must be >= 1, got 0"):
        packing.PackingOptions(max_sequences_per_row=0)
    with pytest.raises(ValueError, match=r"window \(2\) must hold at least"):
        packing.PackingOptions(max_sequences_per_row=3, window=2)
    # floor(128 * 0.15) + 3, below 3 * 20; at p = 0.5 the K * P cap binds.
    assert packing.max_packed_predictions(128, 3, 20, 0.15) == 22
    assert packing.max_packed_predictions(128, 3, 20, 0.5) == 60


@pytest.fixture(scope="module")
def vocab_file():
    return require(shared_data.data_path("vocab", "bert-base-uncased-vocab.txt"),
                   "uncased vocab")


@functools.lru_cache(maxsize=1)
def _tokenizer(vocab_file):
    return BertTokenizer(vocab_file, lower_case=True)


def _dataset(corpus, vocab_file, *, batch_size=None, start_example=0, packing=None):
    options = pretraining.PretrainingOptions(max_seq_length=SEQ, seed=3,
                                             shuffle_buffer_size=64, short_seq_prob=0.5,
                                             packing=packing)
    files = os.path.join(corpus, "*.txt")
    return pretraining.pretraining_dataset(files, _tokenizer(vocab_file), vocab_file,
                                           batch_size=batch_size, options=options,
                                           start_example=start_example)


def _sequences(row):
    """The (tokens, segments, masked positions, masked ids, NSP label) of each sequence of a row."""
    index = row["input_mask"]
    result = []
    for k in range(1, index.max() + 1):
        start = int(np.argmax(index == k))
        end = start + int((index == k).sum())
        take = ((row["masked_lm_weights"] > 0) & (row["masked_lm_positions"] >= start)
                & (row["masked_lm_positions"] < end))
        result.append((tuple(row["input_ids"][start:end]), tuple(row["segment_ids"][start:end]),
                       tuple(row["masked_lm_positions"][take] - start),
                       tuple(row["masked_lm_ids"][take]),
                       int(np.reshape(row["next_sentence_labels"], [-1])[k - 1])))
    return result


def test_packed_rows_hold_the_unpacked_examples_with_their_masks(bert_corpus, vocab_file):
    """Same instances, same masks, same NSP labels, same order; fewer rows."""
    unpacked = list(_dataset(bert_corpus, vocab_file).take(600).as_numpy_iterator())
    rows = list(_dataset(bert_corpus, vocab_file, packing=packing.PackingOptions())
                .take(300).as_numpy_iterator())
    from_unpacked = [_sequences(example)[0] for example in unpacked]
    window = packing.PackingOptions().window
    # The rows of the first window hold exactly its instances (first-fit keeps
    # arrival order within a row, not across rows), so some prefix of the rows
    # holds the first `window` instances, each with its unpacked mask and label.
    packed, prefixes = [], []
    for row in rows:
        packed.extend(_sequences(row))
        prefixes.append(sorted(packed))
    assert sorted(from_unpacked[:window]) in prefixes
    assert len(rows) < len(packed)  # some rows really hold several sequences
    for row in rows:
        index = row["input_mask"]
        slots = int(index.max())
        assert 1 <= slots <= 3
        # Contiguous sequences 1..K, then padding only.
        real = index[index > 0]
        assert (np.diff(real) >= 0).all() and set(real) == set(range(1, slots + 1))
        assert (index[len(real):] == 0).all()
        assert row["next_sentence_weights"].tolist() == [1.0] * slots + [0.0] * (3 - slots)
        starts = [int(np.argmax(index == k)) for k in range(1, slots + 1)]
        assert row["next_sentence_positions"][:slots].tolist() == starts
        assert (row["input_ids"][starts] == 101).all()  # each slot points at a [CLS]


def test_packed_pipeline_resumes_at_a_row(bert_corpus, vocab_file):
    options = packing.PackingOptions(window=64)
    whole = list(_dataset(bert_corpus, vocab_file, packing=options).take(90)
                 .as_numpy_iterator())
    tail = list(_dataset(bert_corpus, vocab_file, packing=options, start_example=70)
                .take(20).as_numpy_iterator())
    for expected, resumed in zip(whole[70:], tail, strict=True):
        for name in expected:
            np.testing.assert_array_equal(expected[name], resumed[name], err_msg=name)


def test_packing_removes_padding_on_short_sequences(bert_corpus, vocab_file):
    """With many short instances (short_seq_prob 0.5) packing fills the rows."""
    def padding(rows):
        return 1.0 - np.mean([row["input_mask"] > 0 for row in rows])

    unpacked = list(_dataset(bert_corpus, vocab_file).take(400).as_numpy_iterator())
    rows = list(_dataset(bert_corpus, vocab_file, packing=packing.PackingOptions())
                .take(200).as_numpy_iterator())
    assert padding(rows) < padding(unpacked) / 2


def test_batched_packed_features_and_model_inputs(bert_corpus, vocab_file):
    batch = next(iter(_dataset(bert_corpus, vocab_file, batch_size=4,
                               packing=packing.PackingOptions())
                      .map(pretraining.to_model_inputs)))
    inputs, labels = batch
    assert inputs["cls_positions"].shape == (4, 3)
    assert inputs["masked_lm_positions"].shape == (4, 22)
    assert labels["next_sentence_weights"].dtype == tf.float32
    assert labels["next_sentence_labels"].shape == (4, 3)
