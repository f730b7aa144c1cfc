"""A signal ends a run in bounded time: before the first step, in a hung step, or twice.

Each case runs `StopOnSignal` in a fresh Python process (no TensorFlow: the stop
flag is a stand-in with `assign`, the global step a list the case moves),
signals it, and times how it ends. The last cases hang a real trainer: one
process, and two workers of a cluster (`long`).
"""

import os
import signal
import subprocess
import sys
import time

import pytest
import tensorflow as tf

from tests.training.conftest import REPO, start_workers

PREAMBLE = """
import os, signal, time
from bert_tf.training.signals import StopOnSignal

class Flag:
    value = False
    def assign(self, value):
        self.value = value

stop = Flag()
step = [0]

# The first step (it traces: its time is no step's), then a loop of 4 steps.
def first_loops(watch, seconds=0.2):
    watch.loop_started(1)
    watch.loop_finished(1, 3.0)
    watch.loop_started(4)
    watch.loop_finished(4, seconds)
"""


def _run(body, timeout=60):
    """Runs PREAMBLE + `body`; returns (exit code, stdout, stderr, seconds)."""
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-c", PREAMBLE + body], cwd=REPO,
                            capture_output=True, text=True, timeout=timeout,
                            env=dict(os.environ, PYTHONPATH=REPO),
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    return result.returncode, result.stdout, result.stderr, time.monotonic() - started


def test_a_signal_before_the_first_step_ends_the_run_without_saving():
    code, out, err, seconds = _run(
        "watch = StopOnSignal(stop, latest_checkpoint=lambda: '/runs/a/ckpt-40',"
        " first_step_grace_seconds=1)\n"
        "watch.loop_started(10)\n"
        "os.kill(os.getpid(), signal.SIGTERM)\n"
        "time.sleep(0.3)\n"
        "print('stop requested', stop.value, flush=True)\n"
        "time.sleep(30)\n"  # the main thread is busy (a step that does not end)
        "print('still running')\n")
    assert code == 128 + signal.SIGTERM, err
    # The stop was requested at once; the deadline ended the process.
    assert "stop requested True" in out and "still running" not in out and seconds < 25
    (line,) = [line for line in err.splitlines() if line.startswith("error:")]
    assert line == ("error: SIGTERM received, but the first training step of this process had "
                    "not finished 1 s after it (no step was trained here): stopped without "
                    "saving a checkpoint; the same command resumes from /runs/a/ckpt-40")


def test_a_signal_while_a_step_hangs_ends_the_run_once_the_step_is_overdue():
    code, out, err, seconds = _run(
        "watch = StopOnSignal(stop, progress=lambda: step[0], min_hang_seconds=2)\n"
        "first_loops(watch)\n"  # steps of 0.05 s: the allowance is the minimum
        "watch.loop_started(4)\n"
        "started = time.monotonic()\n"
        "os.kill(os.getpid(), signal.SIGTERM)\n"
        "time.sleep(1)\n"
        "print('alive after', round(time.monotonic() - started), flush=True)\n"
        "time.sleep(30)\n"
        "print('still running')\n")
    assert code == 128 + signal.SIGTERM, err
    assert "alive after 1" in out and "still running" not in out and seconds < 25
    assert ("error: SIGTERM received, but no training step finished in the last 2 s: the "
            "running step hangs (steps so far took at most 0.1 s): stopped without saving a "
            "checkpoint; the same command resumes from the start (no checkpoint yet)") in err


def test_a_step_hung_before_the_signal_ends_the_run_at_once():
    code, out, err, _ = _run(
        "import threading\n"
        "watch = StopOnSignal(None, progress=lambda: step[0], min_hang_seconds=2)\n"
        "signal.signal(signal.SIGTERM, lambda *args: None)\n"  # another handler's
        "first_loops(watch)\n"
        "watch.loop_started(1000)\n"
        "for _ in range(5):\n"
        "    step[0] += 1\n"
        "    time.sleep(0.2)\n"
        "time.sleep(3)\n"  # the step after those hangs, past its allowance
        "signalled = time.monotonic()\n"
        "def report():\n"
        "    while True:\n"
        "        print('alive', round(time.monotonic() - signalled, 1), flush=True)\n"
        "        time.sleep(0.1)\n"
        "threading.Thread(target=report, daemon=True).start()\n"
        "os.kill(os.getpid(), signal.SIGTERM)\n"
        "time.sleep(30)\n")
    assert code == 128 + signal.SIGTERM, err
    alive = [float(line.split()[1]) for line in out.splitlines() if line.startswith("alive")]
    # Overdue already: the watch ends the run at its next check, within POLL_SECONDS.
    assert max(alive) <= 1.0, alive
    assert "no training step finished in the last 2 s: the running step hangs" in err


def test_a_long_loop_that_keeps_stepping_is_not_taken_for_hung():
    code, out, err, _ = _run(
        "watch = StopOnSignal(None, progress=lambda: step[0], min_hang_seconds=2)\n"
        "signal.signal(signal.SIGTERM, lambda *args: None)\n"
        "first_loops(watch, seconds=0.8)\n"  # steps of 0.2 s
        "watch.loop_started(30)\n"
        "os.kill(os.getpid(), signal.SIGTERM)\n"
        "for _ in range(30):\n"  # 6 s, 3 times the allowance, to the loop's end
        "    time.sleep(0.2)\n"
        "    step[0] += 1\n"
        "watch.loop_finished(30, 6.0)\n"  # the boundary: TensorFlow's handler saves here
        "watch.close()\n"
        "print('loop ended', step[0])\n")
    assert code == 0, err
    assert "loop ended 30" in out and "error:" not in err


def test_without_a_step_counter_a_loop_gets_its_steps_at_the_slowest_pace():
    # As on a TPU: no step is seen before the loop returns.
    code, out, err, seconds = _run(
        "watch = StopOnSignal(None, min_hang_seconds=1)\n"
        "signal.signal(signal.SIGTERM, lambda *args: None)\n"
        "first_loops(watch, seconds=0.8)\n"  # steps of 0.2 s
        "watch.loop_started(10)\n"  # 2 s at that pace, then 1 s for a hung step
        "started = time.monotonic()\n"
        "os.kill(os.getpid(), signal.SIGTERM)\n"
        "time.sleep(2.5)\n"
        "print('alive after', round(time.monotonic() - started, 1), flush=True)\n"
        "time.sleep(30)\n"
        "print('still running')\n")
    assert code == 128 + signal.SIGTERM, err
    assert "alive after 2.5" in out and "still running" not in out and seconds < 25
    assert "no training step finished in the last 1 s" in err


def test_a_step_boundary_in_time_keeps_the_run_to_save_and_stop():
    code, out, err, _ = _run(
        "watch = StopOnSignal(stop, first_step_grace_seconds=2)\n"
        "watch.loop_started(1)\n"
        "os.kill(os.getpid(), signal.SIGTERM)\n"
        "time.sleep(0.5)\n"
        "watch.loop_finished(1, 0.5)\n"  # the boundary: the trainer saves here
        "time.sleep(3)\n"  # a save outside any loop is under no deadline
        "watch.close()\n"
        "print('saved and stopped', stop.value)\n")
    assert code == 0, err
    assert "saved and stopped True" in out and "error:" not in err


@pytest.mark.parametrize("signum, label", [(signal.SIGTERM, "SIGTERM"),
                                           (signal.SIGINT, "Ctrl-C")])
def test_a_second_signal_aborts_at_once(signum, label):
    code, out, err, seconds = _run(
        "watch = StopOnSignal(None)\n"  # another handler owns the signals: only the bound
        f"signal.signal({int(signum)}, lambda *args: None)\n"
        "watch.loop_started(100)\n"
        f"os.kill(os.getpid(), {int(signum)})\n"
        "time.sleep(0.5)\n"
        f"os.kill(os.getpid(), {int(signum)})\n"
        "time.sleep(30)\n"
        "print('still running')\n")
    assert code == 128 + signum, err
    assert "still running" not in out and seconds < 25
    assert f"second {label}: aborted without saving; the run resumes from the start" in err


HUNG_TRAINER = """
import json, os, runpy, sys, time
from bert_tf.training import signals, train_step

HANG_AT = int(os.environ.get("HANG_AT_LOOP", "1"))  # the train loop call that never returns
TASK = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {}).get("index")
if os.environ.get("HANG_TASK", str(TASK)) != str(TASK):  # another worker hangs, not this one
    HANG_AT = 10 ** 9
signals.MIN_HANG_SECONDS = float(os.environ.get("MIN_HANG_SECONDS", signals.MIN_HANG_SECONDS))
build = train_step.TrainStep.__init__

def build_hung(self, *args, **kwargs):
    build(self, *args, **kwargs)
    loop, calls = self.train_loop, []

    def train_loop(iterator, num_steps):
        calls.append(num_steps)
        if len(calls) < HANG_AT:
            return loop(iterator, num_steps)
        # The step never returns, as a worker starved of input spins in it.
        print("hung in train loop", len(calls), flush=True)
        time.sleep(3600)

    self.train_loop = train_loop

train_step.TrainStep.__init__ = build_hung
sys.argv = ["bert_tf.train", *sys.argv[1:]]
runpy.run_module("bert_tf.train", run_name="__main__")
"""


def _start_hung(config, model_dir, **env):
    return subprocess.Popen(
        [sys.executable, "-c", HUNG_TRAINER, "--config", config, "--model_dir", str(model_dir)],
        cwd=REPO, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        env=dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="2", **env))


def _read_until(process, words, output):
    for line in process.stdout:
        output.append(line)
        if words in line:
            return
    raise AssertionError(f"no {words!r} in the output:\n" + "".join(output[-40:]))


def _sigterm_and_wait(process):
    """Sends SIGTERM; returns the exit code and the seconds the process took to end."""
    signalled = time.monotonic()
    process.send_signal(signal.SIGTERM)
    code = process.wait(timeout=60)
    return code, time.monotonic() - signalled


def test_sigterm_ends_a_trainer_hung_in_its_first_step(write_config, tmp_path):
    config = write_config()
    process = _start_hung(config, tmp_path / "run")
    output = []
    try:
        _read_until(process, "tracing the training step", output)
        time.sleep(1)
        code, seconds = _sigterm_and_wait(process)
    finally:
        process.kill()
    output += process.stdout.readlines()
    log = "".join(output)
    assert code == 128 + signal.SIGTERM, log[-3000:]
    assert seconds < 20, log[-3000:]
    assert ("SIGTERM received, but the first training step of this process had not finished "
            "5 s after it (no step was trained here): stopped without saving a checkpoint; "
            "the same command resumes from the start (no checkpoint yet)") in log, log[-3000:]
    assert not list((tmp_path / "run").glob("ckpt-*"))


# The allowance of a hung step in the trainer tests (the default is 10 s).
MIN_HANG = 3


# A real trainer (about 20 s); the fast tests above drive the same deadline with a fake
# step counter and no TensorFlow.
@pytest.mark.long
def test_sigterm_ends_a_trainer_whose_step_hangs_after_the_first(write_config, tmp_path):
    # Loop 1 is the first step (it traces), loop 2 step 2 (saved: ckpt-2), loop 3 hangs.
    config = write_config(trainer={"steps_per_loop": 1, "checkpoint_every": 2,
                                   "eval_every": 0})
    model_dir = tmp_path / "run"
    process = _start_hung(config, model_dir, HANG_AT_LOOP="3", MIN_HANG_SECONDS=str(MIN_HANG))
    output = []
    try:
        _read_until(process, "hung in train loop 3", output)
        # Overdue before the signal: the run ends as soon as the signal comes.
        time.sleep(MIN_HANG + 1)
        code, seconds = _sigterm_and_wait(process)
    finally:
        process.kill()
    output += process.stdout.readlines()
    log = "".join(output)
    assert code == 128 + signal.SIGTERM, log[-3000:]
    assert seconds < 2.5, log[-3000:]  # 0.5 s between checks of the step counter
    (line,) = [line for line in log.splitlines() if line.startswith("error:")]
    assert line.startswith(f"error: SIGTERM received, but no training step finished in the "
                           f"last {MIN_HANG} s: the running step hangs (steps so far took at "
                           "most "), line
    assert line.endswith(f"s): stopped without saving a checkpoint; the same command resumes "
                         f"from {model_dir}/ckpt-2"), line
    assert tf.train.latest_checkpoint(str(model_dir)) == str(model_dir / "ckpt-2")


@pytest.mark.long
def test_sigterm_ends_two_workers_whose_cluster_hangs_in_a_step(write_config, tmp_path):
    # Worker 1 hangs in its third loop (step 3); worker 0 waits in that step's all-reduce
    # for it. TensorFlow's preemption handler owns SIGTERM on both.
    config = write_config(trainer={"steps_per_loop": 1, "checkpoint_every": 2,
                                   "eval_every": 0})
    model_dir = tmp_path / "cluster"
    command = [sys.executable, "-c", HUNG_TRAINER, "--config", config, "--model_dir",
               str(model_dir), "--strategy", "multi_worker"]
    workers = start_workers(command, HANG_AT_LOOP="3", HANG_TASK="1",
                            MIN_HANG_SECONDS=str(MIN_HANG), PYTHONPATH=REPO)
    outputs = [[], []]
    try:
        _read_until(workers[1], "hung in train loop 3", outputs[1])
        time.sleep(MIN_HANG + 1)  # both steps overdue
        # Worker 1 first: the chief's end would close the cluster under it.
        for index in (1, 0):
            signalled = time.monotonic()
            workers[index].send_signal(signal.SIGTERM)
            code = workers[index].wait(timeout=60)
            seconds = time.monotonic() - signalled
            outputs[index] += workers[index].stdout.readlines()
            log = "".join(outputs[index])
            assert code == 128 + signal.SIGTERM, f"worker {index}:\n" + log[-3000:]
            assert seconds < 2.5, f"worker {index}:\n" + log[-3000:]
            (line,) = [line for line in log.splitlines() if line.startswith("error:")]
            assert ("SIGTERM received, but no training step finished in the last "
                    f"{MIN_HANG} s: the running step hangs") in line, line
            assert line.endswith(f"resumes from {model_dir}/ckpt-2"), line
    finally:
        for worker in workers:
            worker.kill()


@pytest.mark.long
def test_loops_of_two_workers_that_keep_stepping_after_sigterm_are_not_cut_short(
        write_config, tmp_path):
    # TensorFlow's preemption handler saves at the end of the loop after the running one:
    # 119 steps after the signal, several times the allowance of a hung step, all of them
    # seen (the step counter is read while the loops run).
    config = write_config(trainer={"train_steps": 400, "steps_per_loop": 60,
                                   "checkpoint_every": 400, "eval_every": 0})
    model_dir = tmp_path / "cluster"
    command = [sys.executable, "-c", HUNG_TRAINER, "--config", config, "--model_dir",
               str(model_dir), "--strategy", "multi_worker"]
    workers = start_workers(command, HANG_AT_LOOP=str(10 ** 6), MIN_HANG_SECONDS="2",
                            PYTHONPATH=REPO)
    outputs = [[], []]
    try:
        _read_until(workers[1], "step 1/400", outputs[1])
        signalled = time.monotonic()
        workers[1].send_signal(signal.SIGTERM)
        for index, worker in enumerate(workers):
            outputs[index] += worker.stdout.readlines()
            log = "".join(outputs[index])
            assert worker.wait(timeout=300) == 42, f"worker {index}:\n" + log[-3000:]
            assert "preempted at step 120" in log, log[-3000:]
            assert not [line for line in log.splitlines() if line.startswith("error:")]
        seconds = time.monotonic() - signalled
    finally:
        for worker in workers:
            worker.kill()
    assert seconds > 2 * 2, seconds  # the premise: the loops outlasted the allowance
    assert tf.train.latest_checkpoint(str(model_dir)) == str(model_dir / "ckpt-120")
