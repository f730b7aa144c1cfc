"""Tiny training runs for tests of any folder: a pretraining experiment small enough to
train in seconds on 2 cores, and `python -m bert_tf.train` run in a subprocess."""

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# What TensorFlow prints at start-up and at a checkpoint: hidden unless --verbose.
TENSORFLOW_NOISE = ("failed call to cuInit", "oneDNN supports", "Sharding callback duration")


def tiny_experiment(corpus_dir, vocab_file, **sections):
    """A pretraining experiment dict small enough to train in seconds on 2 cores."""
    experiment = {
        "task": "pretraining",
        "model": {"encoder": {"vocab_size": 30522, "hidden_size": 32, "num_layers": 2,
                              "num_heads": 2, "intermediate_size": 64,
                              "max_position_embeddings": 64}},
        "data": {"train_files": [os.path.join(corpus_dir, "*.txt")], "vocab_file": vocab_file,
                 "max_seq_length": 32, "max_predictions_per_seq": 5,
                 "documents_per_window": 8, "shuffle_buffer_size": 64,
                 "eval_holdout_every": 5, "max_sequences_per_row": 3},
        "optimizer": {"learning_rate": 1e-3, "warmup_steps": 4},
        "trainer": {"train_steps": 12, "global_batch_size": 8, "steps_per_loop": 2,
                    "checkpoint_every": 4, "eval_every": 6, "eval_steps": 2},
        "runtime": {"strategy": "cpu", "deterministic": True, "seed": 3},
    }
    for section, values in sections.items():
        if isinstance(values, dict):
            experiment.setdefault(section, {}).update(values)
        else:
            experiment[section] = values
    return experiment


def train_command(config, model_dir, *extra):
    return [sys.executable, "-m", "bert_tf.train", "--config", config,
            "--model_dir", str(model_dir), *extra]


def train_env(**extra):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
    env.pop("TF_CONFIG", None)
    env.update(extra)
    return env


def run_train(config, model_dir, *extra, timeout=300, env=None):
    """Runs `python -m bert_tf.train` to completion; returns the CompletedProcess."""
    return subprocess.run(train_command(config, model_dir, *extra), cwd=REPO,
                          env=env or train_env(), capture_output=True, text=True,
                          timeout=timeout)
