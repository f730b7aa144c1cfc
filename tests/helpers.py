"""Small shared helpers for tests: tiny configs, random inputs, required shared data."""

import importlib.resources
import os

import numpy as np
import pytest

from bert_tf.models.encoder_config import EncoderConfig

TINY = EncoderConfig(vocab_size=100, hidden_size=32, num_layers=2, num_heads=4,
                     intermediate_size=64, max_position_embeddings=32)


def random_inputs(batch=2, length=10, vocab_size=100, pad_from=None, seed=0):
    """Encoder inputs; rows padded from `pad_from[i]` when given."""
    rng = np.random.default_rng(seed)
    token_ids = rng.integers(1, vocab_size, (batch, length)).astype("int32")
    segment_ids = np.zeros((batch, length), "int32")
    segment_ids[:, length // 2:] = 1
    padding_mask = np.ones((batch, length), "int32")
    if pad_from is not None:
        for row, start in enumerate(pad_from):
            padding_mask[row, start:] = 0
            token_ids[row, start:] = 0
            segment_ids[row, start:] = 0
    return {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}


def layer_norm_case(seed=0):
    """([x, gamma, beta], upstream gradient) of a [3, 5, 16] LayerNorm, float32 tensors."""
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    x = tf.constant(rng.normal(1.0, 3.0, (3, 5, 16)), tf.float32)
    gamma = tf.constant(rng.normal(size=16), tf.float32)
    beta = tf.constant(rng.normal(size=16), tf.float32)
    upstream = tf.constant(rng.normal(size=(3, 5, 16)), tf.float32)
    return [x, gamma, beta], upstream


def max_abs_diff(a, b):
    return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))


REQUIRE_DATA = os.environ.get("BERT_TF_REQUIRE_DATA") == "1"


def require(path, what):
    """`path` if it exists; else skip the test, or fail it under BERT_TF_REQUIRE_DATA=1."""
    if os.path.exists(path):
        return path
    message = f"{what} not found at {path}"
    if REQUIRE_DATA:
        pytest.fail(f"{message} (BERT_TF_REQUIRE_DATA=1 makes missing data an error)")
    pytest.skip(message)


WIKIPEDIA_EXCERPT = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"


def packaged_copy(*parts):
    """A byte-identical copy of a ../shared/data file that an installed package ships, or None.

    gensim's wheel (in the `test` extra) carries the Wikipedia excerpt as test data,
    so the tests that read it run without ../shared too.
    """
    if parts != ("corpus", WIKIPEDIA_EXCERPT):
        return None
    try:
        resource = importlib.resources.files("gensim") / "test" / "test_data" / WIKIPEDIA_EXCERPT
    except ModuleNotFoundError:
        return None
    return str(resource) if resource.is_file() else None


def require_shared(*parts):
    """A file under ../shared/data, else a packaged copy of it, else skip (or fail in CI)."""
    from tests import shared_data

    path = shared_data.data_path(*parts)
    if not os.path.exists(path):
        path = packaged_copy(*parts) or path
    return require(path, "shared data file")


# A tiny uncased WordPiece vocabulary of TINY.vocab_size tokens, for raw-text tests.
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
TINY_WORDS = ("the", "film", "was", "a", "delight", "dull", "and", "too", "long", "it",
              "is", "not", "good", "bad", "very", "fun", "##ny", "plot", ".", ",", "!")
TINY_VOCAB = SPECIAL_TOKENS + TINY_WORDS + tuple(
    f"w{i}" for i in range(TINY.vocab_size - len(SPECIAL_TOKENS) - len(TINY_WORDS)))


def write_tiny_vocab(directory, name="vocab.txt", tokens=TINY_VOCAB):
    """Writes `tokens` one per line into `directory/name`; returns the path as a str."""
    path = os.path.join(str(directory), name)
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(tokens) + "\n")
    return path


def tiny_ids(*tokens):
    """The ids of `tokens` in TINY_VOCAB."""
    return [TINY_VOCAB.index(token) for token in tokens]


def one_line_refusal(command, argv, capsys) -> str:
    """Runs a `main(argv)` that must refuse its arguments: exit 2, nothing on stdout and
    one `error:` line on stderr, which is returned."""
    code = command(argv)
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert code == 2 and captured.out == ""
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]
