"""A run resumed on another number of workers: two workers then one process, and back.

Model, optimizer, step and loss scale must restore exactly (compared with the
checkpoint by `restore_probe.py`, right after the restore); the input position
is re-derived from the step, said in one log line; the run trains on to its end.
"""

import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from conftest import (
    REPO,
    checkpoint_weights,
    max_weight_difference,
    run_train,
    start_workers,
    train_command,
    train_env,
)

from bert_tf.training import cluster_shape

PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "restore_probe.py")
# No evaluation (no held-out data): the tests time training processes only.
NO_EVAL = {"eval_holdout_every": 0}
NO_DROPOUT = {"encoder": {"vocab_size": 30522, "hidden_size": 32, "num_layers": 2,
                          "num_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64,
                          "hidden_dropout": 0.0, "attention_dropout": 0.0}}
FIRST = {"train_steps": 4, "steps_per_loop": 2, "checkpoint_every": 4, "eval_every": 0}
RESUME = ("--set", "trainer.train_steps=6")


def probe_command(dump, config, model_dir, *extra):
    return [sys.executable, PROBE, str(dump), *train_command(config, model_dir, *extra)[3:]]


def assert_restored_exactly(dump, checkpoint):
    """The state the probe saw after the restore is bit-identical to `checkpoint`'s."""
    with open(dump, "rb") as f:
        restored = pickle.load(f)
    reader = tf.train.load_checkpoint(checkpoint)
    saved = {key for key in reader.get_variable_to_shape_map()
             if key.startswith(("model_variables/", "optimizer_variables/", "step/",
                                "loss_scale/"))}
    assert set(restored) == saved
    assert any(key.startswith("optimizer_variables/") for key in saved)
    for key in saved:
        np.testing.assert_array_equal(restored[key], reader.get_tensor(key), err_msg=key)


def reshape_lines(log):
    return [line for line in log.splitlines() if "was written by" in line]


def recorded_workers(model_dir):
    prefix = tf.train.latest_checkpoint(str(model_dir))
    return cluster_shape.read_saved_shape(prefix).shape.num_workers


@pytest.mark.long
def test_a_run_of_two_workers_resumes_in_one_process(write_config, tmp_path):
    config = write_config(data=NO_EVAL, trainer=FIRST)
    model_dir = tmp_path / "run"
    processes = start_workers(train_command(config, model_dir, "--strategy", "multi_worker"))
    for process in processes:
        log = process.communicate(timeout=600)[0]
        assert process.returncode == 0, log[-3000:]
    saved = tf.train.latest_checkpoint(str(model_dir))
    assert saved.endswith("ckpt-4") and recorded_workers(model_dir) == 2

    dump = tmp_path / "restored.pkl"
    result = subprocess.run(probe_command(dump, config, model_dir, *RESUME), cwd=REPO,
                            env=train_env(), capture_output=True, text=True, timeout=600)
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-3000:]
    assert_restored_exactly(dump, saved)
    lines = reshape_lines(log)
    assert len(lines) == 1, lines
    assert ("ckpt-4 (step 4) was written by 2 workers (2 replicas), global batch 8 (4 per "
            "worker), per_worker input; resuming on 1 worker (1 replica), global batch 8 (8 per "
            "worker), per_worker input") in lines[0]
    assert "each input pipeline skips the 4 batches this shape reads in 4 steps" in lines[0]
    assert f"resumed from {saved} (step 4)" in log
    assert "step 6/6" in log and "finished at step 6" in log
    assert tf.train.latest_checkpoint(str(model_dir)).endswith("ckpt-6")
    assert recorded_workers(model_dir) == 1


@pytest.mark.long
def test_a_run_of_one_process_resumes_on_two_workers(write_config, tmp_path):
    config = write_config(data=NO_EVAL, trainer=FIRST)
    model_dir = tmp_path / "run"
    first = run_train(config, model_dir, timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    saved = tf.train.latest_checkpoint(str(model_dir))
    assert saved.endswith("ckpt-4") and recorded_workers(model_dir) == 1

    # Three replicas cannot split the global batch of 8: one line, exit code 2.
    three = run_train(config, model_dir, "--strategy", "mirrored",
                      "--set", "runtime.logical_cpu_devices=3", timeout=600)
    errors = [line for line in three.stderr.splitlines() if line.startswith("error:")]
    assert three.returncode == 2, three.stderr[-3000:]
    assert errors == [
        f"error: cannot resume {saved}, written by 1 worker (1 replica), global batch 8 (8 per "
        "worker), per_worker input, on 1 worker (3 replicas), global batch 8 (8 per worker), "
        "per_worker input: 8 examples do not split into 3 equal replica batches; resume it on "
        "1, 2, 4 or 8 replicas"], three.stderr[-3000:]
    assert "Traceback" not in three.stderr
    assert tf.train.latest_checkpoint(str(model_dir)) == saved

    dump = tmp_path / "restored_{worker}.pkl"
    processes = start_workers(probe_command(dump, config, model_dir, "--strategy",
                                            "multi_worker", *RESUME))
    logs = [process.communicate(timeout=600)[0] for process in processes]
    for worker, (process, log) in enumerate(zip(processes, logs)):
        assert process.returncode == 0, log[-3000:]
        assert_restored_exactly(str(dump).format(worker=worker), saved)
        lines = reshape_lines(log)
        assert len(lines) == 1, lines
        assert ("written by 1 worker (1 replica), global batch 8 (8 per worker), per_worker "
                "input; resuming on 2 workers (2 replicas), global batch 8 (4 per worker)"
                in lines[0])
        assert "each input pipeline skips the 4 batches" in lines[0]
        assert "finished at step 6" in log
    fingerprints = {line for log in logs for line in log.splitlines()
                    if line.startswith("weights fingerprint:")}
    assert len(fingerprints) == 1
    assert tf.train.latest_checkpoint(str(model_dir)).endswith("ckpt-6")
    assert recorded_workers(model_dir) == 2
    for worker in ("worker_0", "worker_1"):
        assert os.path.exists(model_dir / "input_state" / worker / "input-6.index")


@pytest.mark.long
def test_global_input_resumed_in_one_process_ends_as_an_uninterrupted_run(write_config,
                                                                           tmp_path):
    # With global input every worker reads the single-process batches, so worker 0's input
    # state is the position of one process too: the resumed run continues the same batches.
    config = write_config(model=NO_DROPOUT, data=NO_EVAL,
                          trainer=dict(FIRST, input_distribution="global"))
    model_dir = tmp_path / "run"
    processes = start_workers(train_command(config, model_dir, "--strategy", "multi_worker"))
    for process in processes:
        log = process.communicate(timeout=600)[0]
        assert process.returncode == 0, log[-3000:]

    # The uninterrupted run trains beside the resumed one (not beside the cluster, whose
    # collectives wait on the slowest worker).
    single = subprocess.Popen(train_command(config, tmp_path / "single", *RESUME), cwd=REPO,
                              env=train_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    resumed = run_train(config, model_dir, *RESUME, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    lines = reshape_lines(resumed.stderr)
    assert len(lines) == 1 and "the input position carries over" in lines[0], lines
    log = single.communicate(timeout=600)[0]
    assert single.returncode == 0, log[-3000:]
    difference = max_weight_difference(checkpoint_weights(tmp_path / "single"),
                                       checkpoint_weights(model_dir))
    assert difference < 1e-5
