"""Fixtures for trainer tests: a tiny pretraining config on real data, and subprocess runs."""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


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
                 "eval_holdout_every": 5},
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


@pytest.fixture
def write_config(tmp_path, bert_corpus, shared_file):
    """Writes a tiny experiment YAML (sections updated by keyword) and returns its path."""
    vocab = shared_file("vocab", "bert-base-uncased-vocab.txt")
    counter = iter(range(1000))

    def write(**sections):
        path = tmp_path / f"experiment_{next(counter)}.yaml"
        path.write_text(yaml.safe_dump(tiny_experiment(bert_corpus, vocab, **sections)))
        return str(path)

    return write


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


def start_until_step(experiment_path, model_dir, step, *extra, env=None, prefix=()):
    """Starts a training process and returns it once it has logged `step` or later.

    `prefix` is a command the trainer runs under (e.g. `setpriv ... --`).
    """
    process = subprocess.Popen([*prefix, *train_command(experiment_path, model_dir, *extra)],
                               cwd=REPO,
                               env=env or train_env(), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    output = []
    for line in process.stdout:
        output.append(line)
        match = re.search(r"step (\d+)/\d+", line)
        if match and int(match.group(1)) >= step:
            return process, output
    process.wait()
    raise AssertionError(f"the run ended before step {step}:\n" + "".join(output[-40:]))


def checkpoint_weights(model_dir):
    """`{key: array}` of the model variables in the newest checkpoint of `model_dir`."""
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(model_dir)))
    return {key: reader.get_tensor(key) for key in reader.get_variable_to_shape_map()
            if key.startswith("model_variables/")}


def max_weight_difference(a, b):
    assert a.keys() == b.keys()
    return max(float(np.max(np.abs(a[k].astype(np.float64) - b[k]))) for k in a)


def start_workers(command, count=2):
    """Starts `command` (a list) as each worker of a `count`-worker cluster on localhost.

    Returns the processes (stdout and stderr together in `stdout`).
    """
    from tests.ports import free_ports

    workers = [f"localhost:{port}" for port in free_ports(count)]
    processes = []
    for index in range(count):
        tf_config = json.dumps({"cluster": {"worker": workers},
                                "task": {"type": "worker", "index": index}})
        processes.append(subprocess.Popen(
            command, cwd=REPO, env=train_env(TF_CONFIG=tf_config), stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True))
    return processes
