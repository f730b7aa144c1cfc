"""The in-graph BertTokenizer against BERT's FullTokenizer semantics.

The oracle is `reference_tokenizer.py` (a literal Python re-statement of
google-research/bert tokenization.py); literal expectations guard against
the oracle and the graph drifting together.
"""

import bz2
import hashlib
import json
import os
import random

import numpy as np
import pytest
import tensorflow as tf
from reference_tokenizer import ReferenceTokenizer, basic_tokenize

from bert_tf.text import codepoint_tables as ct
from bert_tf.text.basic_tokenizer import BasicTokenizer
from bert_tf.text.tokenizer import BertTokenizer, _fast_wordpiece

UNCASED = ("vocab", "bert-base-uncased-vocab.txt")
CASED = ("vocab", "bert-base-cased-vocab.txt")

_CACHE = {}


def _cached(kind, path, lower_case):
    key = (kind, path, lower_case)
    if key not in _CACHE:
        if kind == "graph":
            _CACHE[key] = BertTokenizer(path, lower_case=lower_case)
        else:
            _CACHE[key] = ReferenceTokenizer(path, lower_case=lower_case)
    return _CACHE[key]


@pytest.fixture(params=[True, False], ids=["uncased", "cased"])
def pair(request, shared_file):
    """(graph tokenizer, reference tokenizer), uncased and cased."""
    path = shared_file(*(UNCASED if request.param else CASED))
    return _cached("graph", path, request.param), _cached("ref", path, request.param)


@pytest.fixture
def uncased(shared_file):
    return _cached("graph", shared_file(*UNCASED), True)


def _ids(tokenizer, texts, batch_size=512):
    out = []
    for i in range(0, len(texts), batch_size):
        out += tokenizer.tokenize(tf.constant(texts[i : i + batch_size])).to_list()
    return out


def _mismatches(tokenizer, reference, texts):
    got = _ids(tokenizer, texts)
    return [(t, g) for t, g in zip(texts, got) if g != reference.encode(t)]


# --- exactness -------------------------------------------------------------


def test_all_reference_lines_match(shared_file, reference_file):
    tokenizer = _cached("graph", shared_file(*UNCASED), True)
    with open(reference_file("tokenizer_uncased.jsonl"), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    assert len(rows) == 1688
    got = _ids(tokenizer, [r["text"] for r in rows], batch_size=1024)
    matches = sum(g == r["ids"] for g, r in zip(got, rows))
    assert matches == 1688


HARD_CASES = {
    "micro": "µ 5µm",
    "sharp_s": "Straße ß",
    "dotted_i": "İstanbul",
    "greek_final_sigma": "ΟΔΟΣ ΣΑΣ Σ",
    "accents": "Café naïve Ñandú Ångström",
    "combining_marks": "e\u0301t\u0301e\u0301",
    "controls": "a\x00b\x07c\x1bd\u200be\u200df\ufeffg\ufffdh",
    "spaces": "tab\there\nnew\r\nline\u00a0nb\u3000id\u2028ls",
    "cjk": "中文字abc\U00020000",
    "kana": "ひらがなカタカナ",
    "korean": "한국어",
    "emoji": "ok 😀!",
    "arabic": "العربية",
    "punctuation": "!!?...«»—“quoted”",
    "unknown_word": "ok \u2603snowman",
}

UNCASED_TOKENS = {
    "micro": ["µ", "5", "##µ", "##m"],
    "sharp_s": ["st", "##raße", "ß"],
    "dotted_i": ["istanbul"],
    "greek_final_sigma": ["ο", "##δ", "##ος", "σ", "##α", "##ς", "σ"],
    "accents": ["cafe", "naive", "nan", "##du", "ang", "##strom"],
    "combining_marks": ["et", "##e"],
    "controls": ["abc", "##de", "##f", "##gh"],
    "spaces": ["tab", "here", "new", "line", "n", "##b", "id", "l", "##s"],
    "cjk": ["中", "文", "[UNK]", "abc", "[UNK]"],
    "kana": ["ひ", "##ら", "##か", "##な", "##カ", "##タ", "##カ", "##ナ"],
    "korean": ["ᄒ", "##ᅡ", "##ᆫ", "##ᄀ", "##ᅮ", "##ᆨ", "##ᄋ", "##ᅥ"],
    "emoji": ["ok", "[UNK]", "!"],
    "arabic": ["ا", "##ل", "##ع", "##ر", "##ب", "##ي", "##ة"],
    "punctuation": ["!", "!", "?", ".", ".", ".", "«", "»", "—", "“", "quoted", "”"],
    "unknown_word": ["ok", "[UNK]"],
}

CASED_TOKENS = {
    "micro": ["µ", "5", "##µ", "##m"],
    "sharp_s": ["St", "##ra", "##ße", "ß"],
    "dotted_i": ["İ", "##stan", "##bul"],
    "greek_final_sigma": ["Ο", "##Δ", "##Ο", "##Σ", "Σ", "##Α", "##Σ", "Σ"],
    "accents": ["Café", "na", "##ï", "##ve", "Ñ", "##and", "##ú", "Å", "##ng", "##st", "##röm"],
    "combining_marks": ["e", "##́", "##t", "##́", "##e", "##́"],
    "controls": ["a", "##b", "##c", "##de", "##f", "##gh"],
    "spaces": ["ta", "##b", "here", "new", "line", "n", "##b", "id", "l", "##s"],
    "cjk": ["中", "文", "[UNK]", "a", "##b", "##c", "[UNK]"],
    "kana": ["[UNK]"],
    "korean": ["[UNK]"],
    "emoji": ["ok", "[UNK]", "!"],
    "arabic": ["ا", "##ل", "##ع", "##ر", "##ب", "##ي", "##ة"],
    "punctuation": ["!", "!", "?", ".", ".", ".", "«", "»", "—", "“", "quoted", "”"],
    "unknown_word": ["ok", "[UNK]"],
}


def test_hard_cases_literal_and_reference(pair):
    tokenizer, reference = pair
    expected = UNCASED_TOKENS if tokenizer.lower_case else CASED_TOKENS
    names = list(HARD_CASES)
    got = _ids(tokenizer, [HARD_CASES[n] for n in names])
    for name, ids in zip(names, got):
        assert [tokenizer.vocab[i] for i in ids] == expected[name], name
        assert ids == reference.encode(HARD_CASES[name]), name


def test_word_length_limit_is_100_chars(pair):
    tokenizer, reference = pair
    texts = [
        "a" * 100,  # ASCII shortcut: 100 chars still go through WordPiece
        "a" * 101,  # ... 101 chars are one [UNK]
        "é" * 100 + " x",  # general path: 200 bytes, 100 chars
        "é" * 101 + " x",
        "한" * 40,  # 40 syllables are 120 jamo after NFD (uncased): [UNK]
        "x " * 60 + "y" * 101,
    ]
    got = _ids(tokenizer, texts)
    assert tokenizer.unk_id not in got[0] and len(got[0]) > 1
    assert got[1] == [tokenizer.unk_id]
    assert len(got[2]) > 2 and got[3][0] == tokenizer.unk_id
    assert got[5][-1] == tokenizer.unk_id
    for text, ids in zip(texts, got):
        assert ids == reference.encode(text), text[:20]


def test_ascii_shortcut_agrees_with_general_path(pair):
    tokenizer, reference = pair
    # \x0b \x0c \x7f are controls BERT deletes: they must leave the shortcut.
    texts = ["Hello, World!", "a\x0bb\x0cc\x7fd", "tab\tnew\nline\r", "ÀB", "", "x" * 101]
    one_by_one = [tokenizer.tokenize(t).numpy().tolist() for t in texts]
    assert _ids(tokenizer, texts) == one_by_one
    assert [reference.encode(t) for t in texts] == one_by_one


def _real_lines(shared_file):
    lines = []
    with open(shared_file("corpus", "moby-dick", "moby-dick.txt"), encoding="utf-8") as f:
        lines += f.read().splitlines()[:2500]
    with open(shared_file("corpus", "wikitext-2", "valid.txt"), encoding="utf-8") as f:
        lines += f.read().splitlines()[:1500]
    dump = shared_file(
        "corpus", "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
    )
    with bz2.open(dump, "rt", encoding="utf-8") as f:
        lines += [next(f) for _ in range(2500)]
    with open(shared_file("squad", "dev-v1.1.json"), encoding="utf-8") as f:
        squad = json.load(f)
    lines += [p["context"] for a in squad["data"][:6] for p in a["paragraphs"]]
    return [line for line in lines if line.strip()]


def test_real_text_matches_reference(pair, shared_file):
    tokenizer, reference = pair
    lines = _real_lines(shared_file)
    assert len(lines) > 5000
    assert sum(any(ord(c) > 127 for c in line) for line in lines) > 100
    assert _mismatches(tokenizer, reference, lines) == []


def _random_texts(seed, count):
    rng = random.Random(seed)
    interesting = list("aAzZ09 .,'-\t\nΣσΑéÉ中한ßİµ") + [
        "\u0301", "\u200b", "\x00", "\ufffd", "\u00a0", "\u2028", "\u3000",
        "\U0001D16D", "\U0001D165", "\u302e", "\u0f71", "\u0941", "\U00020000",
    ]
    texts = []
    for _ in range(count):
        chars = []
        for _ in range(rng.randint(0, 60)):
            r = rng.random()
            if r < 0.5:
                chars.append(rng.choice(interesting))
            elif r < 0.8:
                chars.append(chr(rng.randint(0x20, 0x7E)))
            else:
                cp = rng.randint(0, 0x10FFFF)
                chars.append(chr(cp) if not 0xD800 <= cp <= 0xDFFF else "x")
        texts.append("".join(chars))
    return texts


def test_random_unicode_matches_reference(pair):
    tokenizer, reference = pair
    texts = _random_texts(seed=7, count=3000)
    assert _mismatches(tokenizer, reference, texts) == []
    # Words too: most oddities end in [UNK] and would hide in the ids.
    words = _words(tokenizer._basic, texts)
    assert [t for t, w in zip(texts, words) if w != basic_tokenize(t, tokenizer.lower_case)] == []


# --- the basic (word) tokenizer ---------------------------------------------


def _words(basic, texts):
    split = basic.split(tf.constant(texts))
    words = tf.strings.unicode_encode(split.words, "UTF-8")
    rows = tf.RaggedTensor.from_row_splits(words, split.word_row_splits).to_list()
    return [[w.decode("utf-8") for w in row] for row in rows]


@pytest.mark.parametrize("lower_case", [True, False], ids=["uncased", "cased"])
def test_basic_tokenizer_context_rules(lower_case):
    basic = BasicTokenizer(lower_case=lower_case)
    texts = [
        # Final sigma looks past case-ignorable chars ('.', "'") in its token.
        "ΟΔΟΣ. ΑΣ'Α ΣΑ Σ",
        "x\U0001D16D\u0301\U0001D165",  # NFD reorders ccc 226 after ccc 216
        "x\U0001D16D\u0941\U0001D165",  # ... but not across a ccc-0 mark (U+0941)
        "",
        "a\u200bb c",  # deleted chars join words
    ]
    got = _words(basic, texts)
    if lower_case:
        assert got[0] == ["οδος", ".", "ασ", "'", "α", "σα", "σ"]
        assert got[1] == ["x\U0001D165\U0001D16D"]
        assert got[2] == ["x\U0001D16D\U0001D165"]
    else:
        assert got[0] == ["ΟΔΟΣ", ".", "ΑΣ", "'", "Α", "ΣΑ", "Σ"]
        assert got[1] == ["x\U0001D16D\u0301\U0001D165"]
    assert got[3] == []
    assert got[4] == ["ab", "c"]
    assert got == [basic_tokenize(t, lower_case) for t in texts]


@pytest.mark.parametrize("lower_case", [True, False], ids=["uncased", "cased"])
def test_end_to_end_wordpiece_splits_exactly_where_bert_does(lower_case):
    """The fast path lets FastWordpieceTokenizer split normalized text itself.

    That is exact only if, on every character the normalizer can emit, its
    split (whitespace, punctuation, CJK per tensorflow-text's ICU data) is
    BERT's: word chars never split, punctuation/CJK always stand alone.
    """
    tables = ct.build_codepoint_tables(lower_case)
    cps = np.arange(ct.NUM_CODEPOINTS)
    packed = tables.main.lookup(cps)
    kind, out = packed & ct.KIND_MASK, cps + (packed >> ct.PAYLOAD_SHIFT)
    emitted = {ct.WORD: set(out[kind == ct.WORD]), ct.ISOLATED: set(out[kind == ct.ISOLATED])}
    for k in (ct.WORD, ct.ISOLATED):
        emitted[k] |= set(tables.expansion_cps[tables.expansion_kinds == k])
    if lower_case:
        emitted[ct.WORD] |= {ct.SMALL_SIGMA, ct.FINAL_SIGMA}
    assert len(emitted[ct.WORD]) > 40000 and len(emitted[ct.ISOLATED]) > 80000
    wordpiece = _fast_wordpiece(
        ["[UNK]", "b", "##b"], no_pretokenization=False, max_bytes_per_word=400
    )
    for k, pieces_expected in ((ct.WORD, 1), (ct.ISOLATED, 3)):
        texts = ["b" + chr(c) + "b" for c in sorted(emitted[k]) if c != ord("b")]
        counts = wordpiece.tokenize(tf.constant(texts)).row_lengths().numpy()
        wrong = [hex(ord(t[1])) for t, n in zip(texts, counts) if n != pieces_expected]
        assert wrong == []


# --- robustness --------------------------------------------------------------


def test_invalid_utf8_is_dropped_like_decode_ignore(pair):
    tokenizer, reference = pair
    texts = [
        b"caf\xc3\xa9\xff\xfe ok",
        b"a\xe2\x82b",  # truncated sequence
        b"\xed\xa0\x80x",  # encoded surrogate
        b"\xc0\x80y",  # overlong NUL
        b"\xf4\x90\x80\x80z",  # above U+10FFFF
        b"\x80\x80abc\xc3",
    ]
    got = _ids(tokenizer, texts)
    assert [tokenizer.vocab[i] for i in got[0]] == (
        ["cafe", "ok"] if tokenizer.lower_case else ["café", "ok"]
    )
    assert got == [reference.encode(t) for t in texts]


def test_binary_junk_huge_and_empty_inputs(pair):
    tokenizer, reference = pair
    rng = random.Random(3)
    junk = [bytes(rng.randrange(256) for _ in range(rng.randrange(300))) for _ in range(300)]
    got = _ids(tokenizer, junk)
    assert got == [reference.encode(t) for t in junk]
    big_text = ("Call me Ishmael. Straße 中文 naïve " * 40000).encode("utf-8")
    big_word = b"x" * (1 << 20)
    results = tokenizer.tokenize(tf.constant([big_text, big_word, b"", b"   "])).to_list()
    assert len(big_text) > 1 << 20
    assert results[0] == reference.encode(big_text)
    assert results[1:] == [[tokenizer.unk_id], [], []]
    for ids in got + results:
        assert all(0 <= i < tokenizer.vocab_size for i in ids)


# --- offsets -------------------------------------------------------------------


def test_offsets_literal(uncased):
    text = "Hello, wörld! 中文 ΟΔΟΣ a\u200bb 한"
    ids, starts, ends = uncased.tokenize_with_offsets(text)
    raw = text.encode("utf-8")
    spans = [
        (uncased.vocab[i], raw[s:e].decode("utf-8"))
        for i, s, e in zip(ids.numpy(), starts.numpy(), ends.numpy())
    ]
    assert spans == [
        ("hello", "Hello"), (",", ","), ("world", "wörld"), ("!", "!"),
        ("中", "中"), ("文", "文"),
        ("ο", "Ο"), ("##δ", "Δ"), ("##ος", "ΟΣ"),
        ("ab", "a\u200bb"),
        ("ᄒ", "한"), ("##ᅡ", "한"), ("##ᆫ", "한"),
    ]


def test_offsets_on_real_paragraphs(uncased, shared_file):
    with open(shared_file("squad", "dev-v1.1.json"), encoding="utf-8") as f:
        squad = json.load(f)
    contexts = [p["context"] for a in squad["data"][:10] for p in a["paragraphs"]]
    ids, starts, ends = uncased.tokenize_with_offsets(tf.constant(contexts))
    assert ids.to_list() == uncased.tokenize(tf.constant(contexts)).to_list()
    checked = 0
    for text, row, row_starts, row_ends in zip(
        contexts, ids.to_list(), starts.to_list(), ends.to_list()
    ):
        raw = text.encode("utf-8")
        assert row_starts == sorted(row_starts)
        for i, s, e in zip(row, row_starts, row_ends):
            piece = uncased.vocab[i]
            if piece == "[UNK]":
                continue
            # The original span normalizes to exactly the piece's text.
            span_words = basic_tokenize(raw[s:e].decode("utf-8"), lower_case=True)
            assert "".join(span_words) == piece.removeprefix("##"), (piece, raw[s:e])
            checked += 1
    assert checked > 20000


# --- API, graph and SavedModel use --------------------------------------------


def test_scalar_and_batch_shapes(uncased):
    scalar = uncased.tokenize("Hello world")
    assert isinstance(scalar, tf.Tensor) and scalar.dtype == tf.int32
    assert scalar.numpy().tolist() == [7592, 2088]
    batch = uncased.tokenize(tf.constant(["Hello world", ""]))
    assert isinstance(batch, tf.RaggedTensor)
    assert batch.to_list() == [[7592, 2088], []]
    with pytest.raises(ValueError, match=r"scalar or 1-D.*\(1, 1\)"):
        uncased.tokenize(tf.constant([["x"]]))


def test_special_ids_and_vocab(uncased, shared_file):
    assert uncased.vocab_size == 30522
    assert (uncased.pad_id, uncased.unk_id, uncased.cls_id, uncased.sep_id, uncased.mask_id) == (
        0, 100, 101, 102, 103,
    )
    assert uncased.id_to_token(tf.constant([101, 7592])).numpy().tolist() == [b"[CLS]", b"hello"]
    assert uncased.token_to_id("hello") == 7592
    with pytest.raises(KeyError, match="no-such-token"):
        uncased.token_to_id("no-such-token")
    contract = uncased.tokenizer_contract()
    with open(shared_file(*UNCASED), "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    assert contract == {
        "vocab_sha256": digest,
        "vocab_size": 30522,
        "lower_case": True,
        "special_token_ids": {"[PAD]": 0, "[UNK]": 100, "[CLS]": 101, "[SEP]": 102, "[MASK]": 103},
    }


def test_detokenize(uncased):
    ids = uncased.tokenize(tf.constant(["Hello, unaffable World!", "naïve"]))
    assert uncased.detokenize(ids).numpy().tolist() == [b"hello , unaffable world !", b"naive"]
    assert uncased.detokenize(tf.constant([7592, 2088])).numpy() == b"hello world"


def test_inside_tf_function_and_dataset(uncased):
    texts = ["Hello, world!", "Straße naïve 中文", "", "ΟΔΟΣ"]
    expected = uncased.tokenize(tf.constant(texts)).to_list()
    traced = tf.function(uncased.tokenize, input_signature=[tf.TensorSpec([None], tf.string)])
    assert traced(tf.constant(texts)).to_list() == expected
    batched = tf.data.Dataset.from_tensor_slices(texts).batch(3).map(uncased.tokenize)
    assert [row for batch in batched for row in batch.to_list()] == expected
    single = tf.data.Dataset.from_tensor_slices(texts).map(uncased.tokenize)
    assert [t.numpy().tolist() for t in single] == expected


def test_saved_model_round_trip(uncased, tmp_path):
    module = tf.Module()
    module.tokenizer = uncased
    module.tokenize = tf.function(
        lambda s: uncased.tokenize(s).to_tensor(-1),
        input_signature=[tf.TensorSpec([None], tf.string)],
    )
    texts = tf.constant(["Hello, world!", "Straße naïve 中文 한"])
    expected = module.tokenize(texts).numpy()
    path = str(tmp_path / "tokenizer")
    tf.saved_model.save(module, path)
    assert os.path.exists(os.path.join(path, "assets", "bert-base-uncased-vocab.txt"))
    loaded = tf.saved_model.load(path)
    np.testing.assert_array_equal(loaded.tokenize(texts).numpy(), expected)


# --- vocab errors and vocab semantics -----------------------------------------


def _write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def test_missing_vocab_file(tmp_path):
    missing = str(tmp_path / "nope.txt")
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        BertTokenizer(missing)


def test_empty_vocab_file(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match=r"empty.*empty\.txt"):
        BertTokenizer(str(empty))


def test_vocab_without_special_tokens(tmp_path):
    vocab = _write(tmp_path / "partial.txt", ["[PAD]", "[UNK]", "[CLS]", "hello"])
    with pytest.raises(ValueError, match=r"partial\.txt.*\[SEP\], \[MASK\]"):
        BertTokenizer(vocab)


def test_small_vocab_matches_reference_with_duplicates(tmp_path):
    # A repeated token maps to its last line, as in BERT's load_vocab;
    # an empty line and a bare "##" are tokens that can never match.
    tokens = SPECIALS + ["un", "##aff", "##able", "a", "", "##", "un", "##b", "b", "  x  "]
    vocab = _write(tmp_path / "small.txt", tokens)
    tokenizer = BertTokenizer(vocab)
    reference = ReferenceTokenizer(vocab)
    texts = ["unaffable", "Unaffable ab", "## x", "un b", "c"]
    got = _ids(tokenizer, texts)
    assert got == [reference.encode(t) for t in texts]
    assert got[0] == [11, 6, 7]
    assert got[4] == [1]
    assert tokenizer.vocab_size == 15
    assert tokenizer.token_to_id("x") == 14


def test_a_tokenizer_from_vocabulary_bytes_is_the_file_tokenizer(tmp_path):
    # A Keras layer keeps its vocabulary in memory (a .keras file's assets are temporary).
    tokens = SPECIALS + ["un", "##aff", "##able", "a", "un", "b"]
    vocab = _write(tmp_path / "small.txt", tokens)
    from_file = BertTokenizer(vocab)
    with open(vocab, "rb") as f:
        from_bytes = BertTokenizer(vocab_bytes=f.read(), vocab_source="the layer's vocabulary")
    texts = ["unaffable", "Unaffable ab", "un b", "c"]
    assert _ids(from_bytes, texts) == _ids(from_file, texts)
    assert from_bytes.tokenizer_contract() == from_file.tokenizer_contract()
    assert from_bytes.vocab_file is None and from_bytes.vocab_asset is None
    with pytest.raises(ValueError, match=r"the layer's vocabulary lacks special token\(s\) "
                                         r"\[MASK\]"):
        BertTokenizer(vocab_bytes="\n".join(SPECIALS[:4]).encode(),
                      vocab_source="the layer's vocabulary")
    with pytest.raises(ValueError, match="exactly one of vocab_file and vocab_bytes"):
        BertTokenizer(vocab, vocab_bytes=b"[PAD]")
