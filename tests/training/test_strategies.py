"""Strategies for real on this machine: one device, mirrored over two CPU devices,
two worker processes on localhost, and the TPU path's selection (its step's shape and
graph: test_accelerator_paths.py)."""

import json
import os
import re
import signal
import subprocess
import time

import pytest
import tensorflow as tf
from conftest import (
    REPO,
    checkpoint_weights,
    max_weight_difference,
    run_train,
    train_command,
    train_env,
)

from bert_tf.training import exit_codes, strategies
from tests.ports import free_ports

NO_DROPOUT = {"encoder": {"vocab_size": 30522, "hidden_size": 32, "num_layers": 2,
                          "num_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64,
                          "hidden_dropout": 0.0, "attention_dropout": 0.0}}
SHORT = {"train_steps": 6, "steps_per_loop": 3, "checkpoint_every": 6, "eval_every": 0}


def test_auto_picks_tpu_then_workers_then_gpus_then_cpu(monkeypatch):
    monkeypatch.delenv("TPU_NAME", raising=False)
    cluster = json.dumps({"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker",
                                                                          "index": 0}})
    assert strategies.choose_strategy("auto", tpu_address="my-tpu", num_gpus=8) == "tpu"
    assert strategies.choose_strategy("auto", num_gpus=8, tf_config=cluster) == "multi_worker"
    assert strategies.choose_strategy("auto", num_gpus=2, tf_config="") == "mirrored"
    assert strategies.choose_strategy("auto", num_gpus=1, tf_config="") == "one_device"
    assert strategies.choose_strategy("auto", num_gpus=0, tf_config="") == "cpu"
    monkeypatch.setenv("TPU_NAME", "pod")
    assert strategies.choose_strategy("auto", num_gpus=0, tf_config="") == "tpu"
    assert strategies.choose_strategy("mirrored", tpu_address="x") == "mirrored"
    with pytest.raises(ValueError, match="--strategy must be one of"):
        strategies.choose_strategy("gpu")


def test_tpu_strategy_without_a_tpu_is_a_clear_error():
    with pytest.raises(RuntimeError, match="--strategy=tpu: cannot reach a TPU at 'local'") as e:
        strategies.create_strategy("tpu", "local")
    assert "\n" not in str(e.value)  # one line, not TensorFlow's kernel dump


def test_train_with_strategy_tpu_and_no_tpu_prints_one_error_line(write_config, tmp_path):
    from conftest import run_train

    result = run_train(write_config(), tmp_path / "run", "--strategy=tpu")
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "cannot reach a TPU" in errors[0], result.stderr[-2000:]
    assert "Registered kernels" not in result.stderr and "Traceback" not in result.stderr


@pytest.mark.long
def test_mirrored_over_two_cpu_devices_matches_one_device(write_config, tmp_path):
    # XLA stays off here (the default on CPUs): jit_compile cannot place the variables
    # of replicas on logical CPU devices ("variable on another device"). XLA is tested
    # on the single-device path, for every task kind, in test_accelerator_paths.py.
    config = write_config(model=NO_DROPOUT, trainer=SHORT)
    one = run_train(config, tmp_path / "one")
    assert one.returncode == 0, one.stderr[-3000:]
    mirrored = run_train(config, tmp_path / "mirrored", "--strategy", "mirrored",
                         "--set", "runtime.logical_cpu_devices=2")
    assert mirrored.returncode == 0, mirrored.stderr[-3000:]
    assert "MirroredStrategy" in mirrored.stderr and "CPU:1" in mirrored.stderr
    difference = max_weight_difference(checkpoint_weights(tmp_path / "one"),
                                       checkpoint_weights(tmp_path / "mirrored"))
    assert difference < 1e-5


def _start_workers(config, model_dir, *extra):
    workers = [f"localhost:{port}" for port in free_ports(2)]
    processes = []
    for index in range(2):
        tf_config = json.dumps({"cluster": {"worker": workers},
                                "task": {"type": "worker", "index": index}})
        processes.append(subprocess.Popen(
            train_command(config, model_dir, "--strategy", "multi_worker", *extra),
            cwd=REPO, env=train_env(TF_CONFIG=tf_config), stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True))
    return processes


@pytest.mark.long
def test_two_worker_processes_train_identically_and_match_one_process(write_config, tmp_path):
    config = write_config(model=NO_DROPOUT, trainer=dict(SHORT, input_distribution="global"))
    single = run_train(config, tmp_path / "single")
    assert single.returncode == 0, single.stderr[-3000:]

    processes = _start_workers(config, tmp_path / "cluster")
    outputs = [p.communicate(timeout=600)[0] for p in processes]
    for process, output in zip(processes, outputs):
        assert process.returncode == 0, output[-3000:]
    fingerprints = [line for output in outputs for line in output.splitlines()
                    if line.startswith("weights fingerprint:")]
    assert len(fingerprints) == 2 and fingerprints[0] == fingerprints[1]
    assert sorted(os.listdir(tmp_path / "cluster" / "input_state")) == ["worker_0", "worker_1"]
    difference = max_weight_difference(checkpoint_weights(tmp_path / "single"),
                                       checkpoint_weights(tmp_path / "cluster"))
    assert difference < 1e-5


@pytest.mark.long
def test_preempting_one_worker_checkpoints_the_cluster_which_then_resumes(write_config,
                                                                          tmp_path):
    config = write_config(trainer={"train_steps": 40, "steps_per_loop": 2,
                                   "checkpoint_every": 40, "eval_every": 0})
    model_dir = tmp_path / "cluster"
    processes = _start_workers(config, model_dir)
    output = []
    for line in processes[1].stdout:  # worker 1, not the chief, is preempted
        output.append(line)
        if "step 6/40" in line:
            processes[1].send_signal(signal.SIGTERM)
            break
    outputs = [p.communicate(timeout=300)[0] for p in processes]
    outputs[1] = "".join(output) + outputs[1]
    # TensorFlow's PreemptionCheckpointHandler: every worker saves at the same
    # step, then exits with code 42 (restart me).
    saved = []
    for process, log in zip(processes, outputs):
        assert process.returncode == 42, log[-3000:]
        saved.append(int(re.search(r"preempted at step (\d+): checkpoint saved", log).group(1)))
    assert saved[0] == saved[1] and 6 <= saved[0] < 40
    assert tf.train.latest_checkpoint(str(model_dir)).endswith(f"ckpt-{saved[0]}")
    for worker in ("worker_0", "worker_1"):
        assert os.path.exists(model_dir / "input_state" / worker / f"input-{saved[0]}.index")

    processes = _start_workers(config, model_dir)
    outputs = [p.communicate(timeout=300)[0] for p in processes]
    for process, log in zip(processes, outputs):
        assert process.returncode == 0, log[-3000:]
        assert f"resumed from {model_dir}/ckpt-{saved[0]}" in log
    fingerprints = {line for log in outputs for line in log.splitlines()
                    if line.startswith("weights fingerprint:")}
    assert len(fingerprints) == 1
    assert tf.train.latest_checkpoint(str(model_dir)).endswith("ckpt-40")


@pytest.mark.long
def test_a_worker_killed_outright_stops_the_other_which_then_resumes_with_it(write_config,
                                                                           tmp_path):
    # SIGKILL: TensorFlow's preemption handling never runs; the coordination service
    # notices the missing heartbeats within runtime.worker_timeout_seconds.
    timeout = 5
    config = write_config(model=NO_DROPOUT, trainer={
        "train_steps": 40, "steps_per_loop": 2, "checkpoint_every": 4, "eval_every": 0,
        "input_distribution": "global"})
    # The uninterrupted run trains beside the cluster (the test waits less).
    single = subprocess.Popen(train_command(config, tmp_path / "single"), cwd=REPO,
                              env=train_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    model_dir = tmp_path / "cluster"
    extra = ("--set", f"runtime.worker_timeout_seconds={timeout}")
    processes = _start_workers(config, model_dir, *extra)
    output = []
    for line in processes[0].stdout:
        output.append(line)
        if "step 10/40" in line:
            break
    else:  # a machine too loaded for the timeout takes a live worker for lost
        pytest.fail("the chief stopped before step 10:\n" + "".join(output[-30:]))
    processes[1].kill()
    killed_at = time.monotonic()
    output.append(processes[0].communicate(timeout=120)[0])
    seconds = time.monotonic() - killed_at
    processes[1].wait()
    output = "".join(output)
    assert processes[0].returncode == exit_codes.LOST_WORKER_EXIT_CODE == 75, output[-3000:]
    # The documented bound is the timeout plus 3 s; 2 s more for a loaded machine.
    assert seconds < timeout + 5, seconds
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in output, output[-3000:]
    step = int(re.search(r"the last checkpoint is step (\d+) \(", errors[0]).group(1))
    assert 8 <= step < 40
    assert re.search(r"lost worker 1 \(localhost:\d+\) of the cluster", errors[0]), errors[0]
    assert f"({model_dir}/ckpt-{step})" in errors[0]

    processes = _start_workers(config, model_dir, *extra)
    outputs = [p.communicate(timeout=600)[0] for p in processes]
    for process, log in zip(processes, outputs):
        assert process.returncode == 0, log[-3000:]
        assert f"resumed from {model_dir}/ckpt-{step}" in log
    log = single.communicate(timeout=600)[0]
    assert single.returncode == 0, log[-3000:]
    difference = max_weight_difference(checkpoint_weights(tmp_path / "single"),
                                       checkpoint_weights(model_dir))
    assert difference < 1e-5
