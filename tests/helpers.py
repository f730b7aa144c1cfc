"""Small shared helpers for tests: tiny configs, random inputs, required shared data."""

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
