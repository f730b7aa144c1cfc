"""Helpers for trainer tests: subprocess runs, workers, checkpoint reads.

The tiny experiment and `run_train` live in `tests/training_runs.py` (tests of
other folders use them too) and are re-exported here for `from conftest import`.
"""

import json
import re
import subprocess

import numpy as np
import tensorflow as tf

from tests.training_runs import REPO, run_train, tiny_experiment, train_command, train_env

__all__ = ["REPO", "checkpoint_weights", "max_weight_difference", "run_train",
           "start_until_step", "start_workers", "tiny_experiment", "train_command", "train_env"]


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


def start_workers(command, count=2, **env):
    """Starts `command` (a list) as each worker of a `count`-worker cluster on localhost.

    `env` is added to each worker's environment (`train_env`).
    Returns the processes (stdout and stderr together in `stdout`).
    """
    from tests.ports import free_ports

    workers = [f"localhost:{port}" for port in free_ports(count)]
    processes = []
    for index in range(count):
        tf_config = json.dumps({"cluster": {"worker": workers},
                                "task": {"type": "worker", "index": index}})
        processes.append(subprocess.Popen(
            command, cwd=REPO, env=train_env(TF_CONFIG=tf_config, **env), stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True))
    return processes
