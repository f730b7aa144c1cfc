"""WordPiece vocabulary building: bert_tf.text.vocab_builder and python -m bert_tf.build_vocab."""

import json
import os
import subprocess
import sys
import unicodedata

import pytest

from bert_tf.text import vocab_builder as vb

BUILD_VOCAB = ["-m", "bert_tf.build_vocab"]

_COUNTS = {}


def _word_counts(path, lower_case=True):
    """Word counts of a corpus, cached: several tests learn from the same text."""
    key = (path, lower_case)
    if key not in _COUNTS:
        _COUNTS[key] = vb.count_words(vb.iter_lines(vb.list_text_files(path)), lower_case)[0]
    return _COUNTS[key]


def _read_vocab(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read().splitlines()


# --- pre-tokenization ----------------------------------------------------------


def test_basic_tokenize_follows_bert_rules():
    text = "Héllo,  WORLD!\u00a0don't\tpay $5.00 力加 a\u200bb\x00c ß Ǆ"
    assert vb.basic_tokenize(text) == [
        "hello", ",", "world", "!", "don", "'", "t", "pay", "$", "5", ".", "00",
        "力", "加", "abc", "ß", "ǆ",
    ]  # fmt: skip
    assert vb.basic_tokenize(text, lower_case=False)[:4] == ["Héllo", ",", "WORLD", "!"]
    assert vb.basic_tokenize("   \n") == []


def test_pre_tokenization_and_wordpiece_reproduce_reference_ids(shared_file, reference_file):
    """With Google's uncased vocab, our basic tokenization + greedy WordPiece
    give the reference (google-research/bert FullTokenizer) ids on 1,688 real
    sentences: the words the learner counts are the words BERT sees."""
    vocab = _read_vocab(shared_file("vocab", "bert-base-uncased-vocab.txt"))
    ids = {token: i for i, token in enumerate(vocab)}
    vocab_set = set(vocab)
    checked = 0
    with open(reference_file("tokenizer_uncased.jsonl"), encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            pieces = [
                piece
                for word in vb.basic_tokenize(record["text"])
                for piece in vb.wordpiece_tokenize(word, vocab_set)
            ]
            assert [ids[p] for p in pieces] == record["ids"], record["text"]
            checked += 1
    assert checked == 1688


# --- learning -------------------------------------------------------------------


def test_merges_on_a_toy_corpus():
    pieces = vb.learn_wordpiece({"low": 5, "lower": 2, "newest": 6, "widest": 3}, 26)
    alphabet = ["e", "w", "s", "t", "l", "o", "n", "d", "i", "r"]
    assert pieces[:10] == alphabet
    assert pieces[10:20] == ["##" + c for c in alphabet]
    # Most frequent pair first; ties go to the smaller pair ("##e" < "##s").
    assert pieces[20:] == ["##es", "##est", "##ow", "low", "##ew", "##ewest"]


def test_moby_dick_vocab_layout_size_and_coverage(shared_file):
    moby = shared_file("corpus", "moby-dick", "moby-dick.txt")
    counts = _word_counts(moby)
    vocab = vb.build_vocab(counts, vocab_size=4000)
    assert len(vocab) == 4000
    assert len(set(vocab)) == len(vocab)
    # BERT's layout: [PAD]=0, [unused0..98]=1..99, [UNK]=100, [CLS]=101, [SEP]=102, [MASK]=103.
    assert vocab[0] == "[PAD]"
    assert vocab[1:100] == [f"[unused{i}]" for i in range(99)]
    assert vocab[100:104] == ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    learned = vocab[104:]
    assert not any(t.startswith("[") and t.endswith("]") and len(t) > 1 for t in learned)
    continuation = [t for t in learned if t.startswith("##")]
    assert len(continuation) > 500
    assert {"##ing", "##ed", "whale", "the", "ahab"} <= set(learned)
    # Uncased: no capital letters, no combining accents.
    assert not any(c.isupper() for t in learned for c in t)
    assert not any(unicodedata.category(c) == "Mn" for t in learned for c in t)
    # Every character of the corpus is a piece (and a ## piece when it can
    # continue a word), so the training text has no [UNK] at all.
    chars = {c for word in counts for c in word}
    assert all(c in vocab for c in chars)
    assert all("##" + c in vocab for c in chars if c.isalnum() and ord(c) < 0x4E00)
    assert vb.unk_rate(counts, vocab) == 0.0
    # Held-out text (State of the Union speeches): measured 0.40 % [UNK].
    sotu = os.path.dirname(shared_file("corpus", "sotu", "2016_barack_obama_d.txt"))
    held_out = _word_counts(os.path.join(sotu, "*.txt"))
    assert vb.unk_rate(held_out, vocab) < 0.006


def test_padding_to_a_multiple_keeps_ids(shared_file):
    counts = _word_counts(shared_file("corpus", "moby-dick", "moby-dick.txt"))
    plain = vb.build_vocab(counts, vocab_size=3000)
    padded = vb.build_vocab(counts, vocab_size=3000, pad_to_multiple_of=128)
    assert len(padded) == 3072
    assert padded[:3000] == plain  # padding only appends; learning is deterministic
    assert padded[3000:] == [f"[unused{i}]" for i in range(99, 171)]


def test_reserved_count_and_cased_option(shared_file):
    counts = _word_counts(shared_file("corpus", "moby-dick", "moby-dick.txt"), lower_case=False)
    vocab = vb.build_vocab(counts, vocab_size=2000, num_reserved=3)
    assert vocab[:8] == [
        "[PAD]", "[unused0]", "[unused1]", "[unused2]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
    ]  # fmt: skip
    assert len(vocab) == 2000
    assert {"Ahab", "I", "The"} <= set(vocab)
    assert vb.unk_rate(counts, vocab) == 0.0


def test_tiny_corpus_is_padded_to_the_requested_size():
    vocab = vb.build_vocab({"ab": 2, "b": 1}, vocab_size=120)
    assert len(vocab) == 120
    # Alphabet by frequency, "##" forms, the one merge, then padding.
    assert vocab[104:110] == ["b", "a", "##b", "##a", "ab", "[unused99]"]


def test_bad_sizes_and_inputs_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="vocab_size 110 is too small"):
        vb.build_vocab({"abcdefgh": 1}, vocab_size=110)
    with pytest.raises(ValueError, match="leaves no room"):
        vb.build_vocab({"a": 1}, vocab_size=104)
    with pytest.raises(ValueError, match="input text is empty"):
        vb.build_vocab({}, vocab_size=1000)
    missing = str(tmp_path / "none*.txt")
    with pytest.raises(ValueError, match="matches no file") as error:
        vb.list_text_files([missing])
    assert missing in str(error.value)


# --- command line ---------------------------------------------------------------------


def test_cli_on_sotu_with_padding_and_progress(shared_file, tmp_path):
    folder = os.path.dirname(shared_file("corpus", "sotu", "2016_barack_obama_d.txt"))
    output = tmp_path / "vocab.txt"
    result = subprocess.run(
        [
            sys.executable, *BUILD_VOCAB,
            "--input", os.path.join(folder, "19*.txt"), os.path.join(folder, "20*.txt"),
            "--output", str(output),
            "--vocab_size", "6000",
            "--pad_to_multiple_of", "128",
            "--progress_interval", "0",
        ],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "[UNK] rate on the input: 0.0000%" in result.stdout
    assert "vocabulary: 6,016 tokens" in result.stdout
    assert "reading 123 file(s)" in result.stderr
    assert "learned 5,500 of 5,896 pieces" in result.stderr
    vocab = _read_vocab(output)
    assert len(vocab) == 6016 and len(set(vocab)) == 6016
    assert vocab[100:104] == ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert vocab[-1] == "[unused114]"


def test_cli_max_lines_cased_and_errors(shared_file, tmp_path):
    moby = shared_file("corpus", "moby-dick", "moby-dick.txt")
    output = tmp_path / "vocab.txt"
    result = subprocess.run(
        [sys.executable, *BUILD_VOCAB, "--input", moby, "--output", str(output),
         "--vocab_size", "1000", "--cased", "--max_lines", "2000"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "lines: 2,000," in result.stdout
    vocab = _read_vocab(output)
    assert {"The", "I", "the"} <= set(vocab)  # cased: both spellings are pieces
    result = subprocess.run(
        [sys.executable, *BUILD_VOCAB, "--input", str(tmp_path / "missing*.txt"),
         "--output", str(tmp_path / "v.txt")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 1
    assert "missing*.txt" in result.stderr and "matches no file" in result.stderr
