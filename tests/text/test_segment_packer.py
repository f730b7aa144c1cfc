"""SegmentPacker: [CLS] A [SEP] (B [SEP]), BERT's longest-first truncation, padding."""

import json

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.text.segment_packer import SegmentPacker, truncated_lengths
from bert_tf.text.tokenizer import BertTokenizer

CLS, SEP = 101, 102


def _bert_truncate_seq_pair(len_a, len_b, budget):
    """google-research/bert `_truncate_seq_pair`, on lengths."""
    while len_a + len_b > budget:
        if len_a > len_b:
            len_a -= 1
        else:
            len_b -= 1
    return len_a, len_b


def test_truncated_lengths_equal_bert_loop():
    # The one truncation formula: the packer's pairs and pretraining's
    # sentence pairs (bert_tf.data.sentence_pairs) both use it.
    pairs = [(a, b) for a in range(40) for b in range(40)]
    len_a = tf.constant([a for a, _ in pairs], tf.int64)
    len_b = tf.constant([b for _, b in pairs], tf.int64)
    for budget in (*range(0, 16), 33):
        new_a, new_b = truncated_lengths(len_a, len_b, budget)
        got = list(zip(new_a.numpy().tolist(), new_b.numpy().tolist()))
        assert got == [_bert_truncate_seq_pair(a, b, budget) for a, b in pairs], budget


def test_pair_batch_literal():
    packer = SegmentPacker(8, cls_id=CLS, sep_id=SEP, pad_id=0)
    a = tf.ragged.constant([[1, 2, 3, 4, 5, 6], [7], []])
    b = tf.ragged.constant([[11, 12], [13, 14, 15, 16, 17, 18], [19]])
    out = packer([a, b])
    assert sorted(out) == ["padding_mask", "segment_ids", "token_ids"]
    assert all(v.dtype == tf.int32 and v.shape == (3, 8) for v in out.values())
    # Budget 5: (6, 2) -> (3, 2); (1, 6) -> (1, 4); (0, 1) fits.
    assert out["token_ids"].numpy().tolist() == [
        [101, 1, 2, 3, 102, 11, 12, 102],
        [101, 7, 102, 13, 14, 15, 16, 102],
        [101, 102, 19, 102, 0, 0, 0, 0],
    ]
    assert out["segment_ids"].numpy().tolist() == [
        [0, 0, 0, 0, 0, 1, 1, 1],
        [0, 0, 0, 1, 1, 1, 1, 1],
        [0, 0, 1, 1, 0, 0, 0, 0],
    ]
    assert out["padding_mask"].numpy().tolist() == [
        [1, 1, 1, 1, 1, 1, 1, 1],
        [1, 1, 1, 1, 1, 1, 1, 1],
        [1, 1, 1, 1, 0, 0, 0, 0],
    ]


def test_tie_trims_second_segment_first():
    # Budget 4 of (3, 3): BERT trims B, A, B -> A keeps 2, B keeps 2;
    # budget 3 -> A keeps 2, B keeps 1 (A gets the odd token).
    out7 = SegmentPacker(7, CLS, SEP)([tf.constant([1, 2, 3]), tf.constant([4, 5, 6])])
    assert out7["token_ids"].numpy().tolist() == [101, 1, 2, 102, 4, 5, 102]
    out6 = SegmentPacker(6, CLS, SEP)([tf.constant([1, 2, 3]), tf.constant([4, 5, 6])])
    assert out6["token_ids"].numpy().tolist() == [101, 1, 2, 102, 4, 102]


def test_single_segment_unbatched_and_batched():
    packer = SegmentPacker(5, CLS, SEP, pad_id=9)
    single = packer(tf.constant([1, 2, 3, 4, 5]))
    assert single["token_ids"].numpy().tolist() == [101, 1, 2, 3, 102]
    assert single["segment_ids"].numpy().tolist() == [0] * 5
    batch = packer(tf.ragged.constant([[1], [1, 2, 3, 4]]))
    assert batch["token_ids"].numpy().tolist() == [[101, 1, 102, 9, 9], [101, 1, 2, 3, 102]]
    assert batch["padding_mask"].numpy().tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]


def test_dense_and_nested_ragged_inputs():
    packer = SegmentPacker(6, CLS, SEP)
    dense = packer(tf.constant([[1, 2], [3, 4]], tf.int64))
    assert dense["token_ids"].numpy().tolist() == [[101, 1, 2, 102, 0, 0], [101, 3, 4, 102, 0, 0]]
    words = tf.ragged.constant([[[1, 2], [3]], [[4]]])  # [B, (words), (pieces)]
    nested = packer(words)
    assert nested["token_ids"].numpy().tolist() == [[101, 1, 2, 3, 102, 0], [101, 4, 102, 0, 0, 0]]


def test_errors():
    with pytest.raises(ValueError, match="max_seq_length must be >= 2"):
        SegmentPacker(1, CLS, SEP)
    with pytest.raises(ValueError, match=">= 3 for a segment pair, got 2"):
        SegmentPacker(2, CLS, SEP)([tf.constant([1]), tf.constant([2])])
    with pytest.raises(ValueError, match="1 or 2 segments, got 3"):
        SegmentPacker(8, CLS, SEP)([tf.constant([1])] * 3)
    with pytest.raises(ValueError, match="all batched or all single"):
        SegmentPacker(8, CLS, SEP)([tf.constant([1]), tf.ragged.constant([[2]])])


def test_in_tf_function_and_dataset_map():
    packer = SegmentPacker(6, CLS, SEP)
    a = tf.ragged.constant([[1, 2, 3, 4], [5]])
    b = tf.ragged.constant([[6], [7, 8, 9]])
    expected = packer([a, b])
    traced = tf.function(lambda x, y: packer([x, y]))
    np.testing.assert_array_equal(traced(a, b)["token_ids"], expected["token_ids"])
    dataset = tf.data.Dataset.from_tensor_slices((a, b)).map(lambda x, y: packer([x, y]))
    rows = [example["token_ids"].numpy().tolist() for example in dataset]
    assert rows == expected["token_ids"].numpy().tolist()


def test_tokenizer_and_packer_reproduce_reference_inputs(shared_file, reference_file):
    """Our ids for the MiniLM reference inputs: SST-2 singles and MRPC pairs, length 64."""
    tokenizer = BertTokenizer(shared_file("vocab", "bert-base-uncased-vocab.txt"))
    with open(reference_file("minilm_l6_reference_texts.json"), encoding="utf-8") as f:
        texts = json.load(f)
    reference = np.load(reference_file("minilm_l6_reference.npz"))
    packer = SegmentPacker.from_tokenizer(tokenizer, texts["max_length"])
    singles = [i for i, b in enumerate(texts["segment_b"]) if b is None]
    pairs = [i for i, b in enumerate(texts["segment_b"]) if b is not None]
    assert len(singles) == 16 and len(pairs) == 16
    got = np.zeros((3, 32, texts["max_length"]), np.int32)
    single = packer(tokenizer.tokenize(tf.constant([texts["segment_a"][i] for i in singles])))
    pair = packer(
        [
            tokenizer.tokenize(tf.constant([texts["segment_a"][i] for i in pairs])),
            tokenizer.tokenize(tf.constant([texts["segment_b"][i] for i in pairs])),
        ]
    )
    for rows, out in ((singles, single), (pairs, pair)):
        for k, key in enumerate(("token_ids", "segment_ids", "padding_mask")):
            got[k, rows] = out[key].numpy()
    # The reference came from Hugging Face's Rust tokenizer, whose
    # longest-first truncation breaks a tie by trimming A: pair 22 has
    # (31, 33) pieces for a budget of 61; BERT trims B on the tie -> (31, 30),
    # Hugging Face -> (30, 31). Every other row is identical.
    differs = (got != np.stack([reference[k] for k in ("input_ids", "segment_ids", "input_mask")]))
    assert np.flatnonzero(differs.any(axis=(0, 2))).tolist() == [22]
    a = tokenizer.tokenize(texts["segment_a"][22]).numpy().tolist()
    b = tokenizer.tokenize(texts["segment_b"][22]).numpy().tolist()
    assert (len(a), len(b)) == (31, 33)
    assert got[0, 22].tolist() == [CLS] + a + [SEP] + b[:30] + [SEP]
    assert reference["input_ids"][22].tolist() == [CLS] + a[:30] + [SEP] + b[:31] + [SEP]
