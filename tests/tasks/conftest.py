"""Fixtures for fine-tuning tests: a tiny encoder checkpoint in bert_tf's format."""

import pytest

from tests.helpers import require


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory):
    """A tiny random BERT encoder saved in bert_tf's format with Google's uncased vocab."""
    from bert_tf.checkpoints import loading
    from bert_tf.models.bert_encoder import BertEncoder
    from research import shared_data

    vocab = require(shared_data.data_path("vocab", "bert-base-uncased-vocab.txt"),
                    "shared data file")
    encoder = BertEncoder(vocab_size=30522, hidden_size=32, num_layers=2, num_heads=2,
                          intermediate_size=64, max_position_embeddings=512)
    directory = str(tmp_path_factory.mktemp("tiny_checkpoint"))
    loading.save(encoder, directory, vocab_file=vocab, lower_case=True)
    return directory
