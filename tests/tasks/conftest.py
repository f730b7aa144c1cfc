"""Fixtures for task tests: a tiny pretraining experiment on the real corpus (the tiny
encoder checkpoint is tests/conftest.py's `tiny_checkpoint`)."""

import os

import pytest


@pytest.fixture
def pretraining_experiment(bert_corpus, shared_file):
    """A one-layer pretraining experiment on real speeches; every 5th one held out."""
    from bert_tf import config as config_lib
    from bert_tf.tasks.pretraining import PretrainingExperiment

    values = {
        "task": "pretraining",
        "model": {"encoder": {"vocab_size": 30522, "hidden_size": 16, "num_layers": 1,
                              "num_heads": 2, "intermediate_size": 32,
                              "max_position_embeddings": 64}},
        "data": {"train_files": [os.path.join(bert_corpus, "*.txt")],
                 "vocab_file": shared_file("vocab", "bert-base-uncased-vocab.txt"),
                 "max_seq_length": 32, "max_predictions_per_seq": 5,
                 "documents_per_window": 4, "shuffle_buffer_size": 16,
                 "eval_holdout_every": 5, "max_sequences_per_row": 3},
    }
    return config_lib.from_dict(PretrainingExperiment, values)
