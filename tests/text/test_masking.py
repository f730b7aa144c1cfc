"""Tests of bert_tf.text.masking: BERT's masked-LM selection, in graph and stateless."""

import functools
import glob
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data.sentence_split import split_sentences
from bert_tf.text import masking
from bert_tf.text.tokenizer import BertTokenizer

# A toy vocabulary: ids 0-4 special, 5-9 words, 10-12 "##" pieces, 13 [unused0].
TOY_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
              "the", "cat", "sat", "on", "mat", "##s", "##ting", "##ed", "[unused0]")
PAD, UNK, CLS, SEP, MASK = range(5)


@pytest.fixture(scope="module")
def toy_vocab():
    return masking.vocab_info_from_tokens(TOY_TOKENS)


@pytest.fixture
def vocab_file(shared_file):
    return shared_file("vocab", "bert-base-uncased-vocab.txt")


def test_vocab_info_reads_special_ids_continuations_and_random_pool(toy_vocab):
    assert (toy_vocab.pad_id, toy_vocab.unk_id, toy_vocab.cls_id, toy_vocab.sep_id,
            toy_vocab.mask_id) == (0, 1, 2, 3, 4)
    assert toy_vocab.is_continuation.tolist() == [False] * 10 + [True] * 3 + [False]
    # Bracketed tokens ([PAD] ... [unused0]) are never random replacements.
    assert toy_vocab.random_token_ids.tolist() == list(range(5, 13))


def test_real_vocab(shared_file):
    vocab = masking.read_vocab(shared_file("vocab", "bert-base-uncased-vocab.txt"))
    assert vocab.vocab_size == 30522
    assert (vocab.pad_id, vocab.unk_id, vocab.cls_id, vocab.sep_id, vocab.mask_id) == (
        0, 100, 101, 102, 103)
    assert vocab.tokens[int(np.flatnonzero(vocab.is_continuation)[0])].startswith("##")
    # 994 [unusedN] plus the 5 special tokens are left out of the random pool.
    assert len(vocab.random_token_ids) == 30522 - 994 - 5


def test_vocab_without_special_tokens_is_an_error(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("[PAD]\n[UNK]\nhello\n")
    with pytest.raises(ValueError, match=r"vocab.txt.*\[CLS\]"):
        masking.read_vocab(str(path))


@pytest.mark.parametrize("length, expected", [(128, 19), (100, 15), (10, 2), (3, 1),
                                              (30, 4), (500, 20)])
def test_num_predictions_is_berts_rounding(length, expected):
    # round(128 * .15) = 19, round(10 * .15) = round(1.5) = 2, never below 1, capped at 20;
    # round(30 * .15) = round(4.5) = 4 (half to even, like Python's round).
    assert int(masking.num_predictions(length, 0.15, 20)) == expected


def _masker(vocab, **kwargs):
    kwargs.setdefault("max_predictions_per_seq", 6)
    return masking.DynamicMasker.from_vocab(vocab, **kwargs)


def test_mask_tokens_layout(toy_vocab):
    ids = tf.constant([CLS, 5, 6, 7, 8, 9, 5, 6, SEP, 7, 8, 9, 5, 6, 7, SEP, PAD, PAD])
    out = _masker(toy_vocab)(ids, [3, 4])
    positions = out["masked_lm_positions"].numpy()
    weights = out["masked_lm_weights"].numpy()
    # 16 real tokens -> round(2.4) = 2 predictions, padded to 6.
    assert weights.tolist() == [1, 1, 0, 0, 0, 0]
    real = positions[:2]
    assert list(real) == sorted(real)
    assert all(ids.numpy()[p] not in (CLS, SEP, PAD) for p in real)
    assert positions[2:].tolist() == [0] * 4
    assert out["masked_lm_ids"].numpy()[:2].tolist() == ids.numpy()[real].tolist()
    unchanged = np.ones(18, bool)
    unchanged[real] = False
    assert (out["input_ids"].numpy()[unchanged] == ids.numpy()[unchanged]).all()


def test_same_seed_same_mask_other_seed_other_mask(toy_vocab):
    ids = tf.constant([CLS] + [5, 6, 7, 8, 9] * 12 + [SEP])
    masker = _masker(toy_vocab)
    first = masker(ids, [1, 2])
    again = masker(ids, [1, 2])
    other = masker(ids, [1, 3])
    for name in first:
        np.testing.assert_array_equal(first[name], again[name])
    assert not np.array_equal(first["masked_lm_positions"], other["masked_lm_positions"])


def test_nothing_to_mask(toy_vocab):
    out = _masker(toy_vocab)(tf.constant([CLS, SEP, PAD, PAD]), [1, 2])
    assert out["masked_lm_weights"].numpy().sum() == 0
    assert out["input_ids"].numpy().tolist() == [CLS, SEP, PAD, PAD]


def test_whole_word_masking_masks_words_entirely(toy_vocab):
    # Words: "sat ##ting", "mat ##s ##ed" and singles; a "##" piece right
    # after [SEP] starts its own word.
    ids = tf.constant([CLS, 5, 7, 11, 6, 9, 10, 12, 8, SEP, 10, 5, 7, 11, SEP])
    word_of = [-1, 0, 1, 1, 2, 3, 3, 3, 4, -1, 5, 6, 7, 7, -1]
    masker = _masker(toy_vocab, whole_word_masking=True, max_predictions_per_seq=8,
                     masked_lm_prob=0.4)
    sizes_seen = set()
    for seed in range(40):
        out = masker(ids, [seed, 0])
        weights = out["masked_lm_weights"].numpy()
        chosen = set(out["masked_lm_positions"].numpy()[weights > 0].tolist())
        words = {word_of[p] for p in chosen}
        assert all(word_of[p] >= 0 for p in chosen)
        # Every piece of every touched word is selected.
        assert chosen == {p for p, w in enumerate(word_of) if w in words}
        assert len(chosen) <= 6  # round(15 * 0.4) = 6
        sizes_seen.add(len(chosen))
    assert max(sizes_seen) == 6


def _split_of(vocab, ids, out):
    """Fractions of the selected tokens now [MASK], unchanged, and replaced."""
    ids = np.asarray(ids)
    weights = out["masked_lm_weights"].numpy() > 0
    positions = out["masked_lm_positions"].numpy()[weights]
    now, original = out["input_ids"].numpy()[positions], ids[positions]
    return (np.mean(now == vocab.mask_id), np.mean(now == original),
            np.mean((now != vocab.mask_id) & (now != original)))


@pytest.mark.parametrize("whole_word_masking", [False, True])
@pytest.mark.parametrize("fractions", [(0.8, 0.1, 0.1), (1.0, 0.0, 0.0), (0.0, 1.0, 0.0),
                                       (0.0, 0.0, 1.0), (0.8, 0.0, 0.2), (0.0, 0.2, 0.8)])
def test_masking_fractions_decide_what_selected_tokens_become(vocab_file, fractions,
                                                              whole_word_masking):
    vocab = masking.read_vocab(vocab_file)
    rng = np.random.default_rng(0)
    # Word pieces only (no "##"), so every selected token is a word of its own.
    words = vocab.random_token_ids[~vocab.is_continuation[vocab.random_token_ids]]
    ids = np.concatenate([[vocab.cls_id], rng.choice(words, 4000), [vocab.sep_id]])
    masker = masking.DynamicMasker.from_vocab(
        vocab, whole_word_masking=whole_word_masking, max_predictions_per_seq=600,
        fractions=masking.MaskingFractions(*fractions))
    out = masker(tf.constant(ids, tf.int32), [5, 6])
    assert out["masked_lm_weights"].numpy().sum() == 600
    # 600 draws: each fraction within 0.06 of its setting; at 0 or 1 within 0.005 (a
    # random replacement can draw the original token).
    for measured, wanted in zip(_split_of(vocab, ids, out), fractions):
        assert abs(measured - wanted) <= (0.005 if wanted in (0.0, 1.0) else 0.06)


@pytest.mark.parametrize("fractions, message", [
    ((0.9, 0.1, 0.1), r"mask, keep, random must sum to 1; got mask=0.9, keep=0.1, "
                      r"random=0.1 \(sum 1.1\)"),
    ((1.2, -0.1, -0.1), r"mask must be in \[0, 1\]; got mask=1.2"),
    ((0.5, 0.5, -0.0001), r"random must be in \[0, 1\]"),
])
def test_invalid_masking_fractions_are_refused_naming_them(toy_vocab, fractions, message):
    with pytest.raises(ValueError, match=message):
        _masker(toy_vocab, fractions=masking.MaskingFractions(*fractions))


def _python_greedy(sizes, budget):
    taken, used = [], 0
    for size in sizes:
        fits = used + size <= budget
        taken.append(fits)
        used += size if fits else 0
    return taken


def test_greedy_fit_matches_berts_loop():
    rng = np.random.default_rng(0)
    for _ in range(200):
        sizes = rng.integers(1, 5, rng.integers(0, 30))
        budget = int(rng.integers(1, 25))
        got = masking._greedy_fit(tf.constant(sizes, tf.int32), tf.constant(budget))
        assert got.numpy().tolist() == _python_greedy(sizes.tolist(), budget)


# --- statistics on real text ----------------------------------------------


@pytest.fixture
def real_sequences(shared_file, vocab_file):
    """[CLS] + 126 tokens + [SEP] windows of real State of the Union text, >= 100k tokens."""
    return _real_sequences(shared_file("corpus", "sotu"), vocab_file)


@functools.lru_cache(maxsize=1)
def _real_sequences(sotu_dir, vocab_file):
    # Speeches of the 1800s: each file holds one speech on one line.
    files = sorted(glob.glob(os.path.join(sotu_dir, "18*.txt")))
    assert len(files) >= 45, f"expected the 1800s speeches in {sotu_dir}"
    tokenizer = BertTokenizer(vocab_file)
    sentences = []
    for path in files[:45]:
        with open(path, encoding="utf-8") as f:
            sentences.extend(split_sentences(f.read()))
    ids = tokenizer.tokenize(tf.constant(sentences)).flat_values.numpy()
    body = 126
    rows = ids[: len(ids) // body * body].reshape(-1, body)  # [N, 126]
    n = len(rows)
    sequences = np.concatenate([np.full((n, 1), 101), rows, np.full((n, 1), 102)], axis=1)
    assert sequences.size >= 100_000
    return sequences.astype(np.int32)


def _mask_all(masker, sequences, seed):
    dataset = tf.data.Dataset.from_tensor_slices(sequences).enumerate().map(
        lambda i, ids: masker(ids, tf.random.experimental.stateless_fold_in([seed, 0], i)),
        num_parallel_calls=tf.data.AUTOTUNE).batch(512)
    batches = list(dataset.as_numpy_iterator())
    return {name: np.concatenate([b[name] for b in batches]) for name in batches[0]}


def test_real_text_statistics(real_sequences, vocab_file):
    sequences = real_sequences
    vocab = masking.read_vocab(vocab_file)
    out = _mask_all(masking.DynamicMasker.from_vocab(vocab, max_predictions_per_seq=20),
                    sequences, seed=7)
    weights = out["masked_lm_weights"]
    selected = weights.sum()
    # 19 of 128 per sequence: BERT's round(len * 0.15).
    assert abs(selected / sequences.size - 0.15) < 0.005
    rows, cols = np.nonzero(weights)
    positions = out["masked_lm_positions"][rows, cols]
    original = out["masked_lm_ids"][rows, cols]
    assert (original == sequences[rows, positions]).all()
    now = out["input_ids"][rows, positions]
    masked = np.mean(now == vocab.mask_id)
    kept = np.mean(now == original)
    replaced = np.mean((now != vocab.mask_id) & (now != original))
    assert abs(masked - 0.8) < 0.015
    assert abs(kept - 0.1) < 0.015
    assert abs(replaced - 0.1) < 0.015
    # Random replacements come from the non-special vocabulary.
    assert np.isin(now[(now != vocab.mask_id) & (now != original)],
                   vocab.random_token_ids).all()
    # [CLS] and [SEP] are never selected; positions ascend.
    assert not np.isin(positions, [0, 127]).any()
    padded = np.where(weights > 0, out["masked_lm_positions"], 10 ** 6)
    assert (np.diff(padded, axis=1) > 0).all()


def test_real_text_whole_word_masking(real_sequences, vocab_file):
    sequences = real_sequences
    vocab = masking.read_vocab(vocab_file)
    sequences = sequences[:400]
    out = _mask_all(masking.DynamicMasker.from_vocab(
        vocab, whole_word_masking=True, max_predictions_per_seq=20), sequences, seed=3)
    continuation = vocab.is_continuation[sequences]  # [N, 128]
    multi_piece_words = 0
    for i, (row, weights) in enumerate(zip(out["masked_lm_positions"],
                                           out["masked_lm_weights"])):
        chosen = np.zeros(128, bool)
        chosen[row[weights > 0]] = True
        # A piece and the "##" piece after it are chosen together or not at all
        # (position 1 follows [CLS]; position 127 is [SEP]).
        glued = continuation[i, 2:127]
        assert (chosen[2:127][glued] == chosen[1:126][glued]).all()
        multi_piece_words += int((chosen[2:127] & glued).any())
        assert 1 <= weights.sum() <= 20
    assert multi_piece_words > 20  # the property was actually exercised
