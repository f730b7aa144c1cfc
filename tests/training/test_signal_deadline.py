"""A signal ends a run in bounded time: before the first step, in a hung step, or twice.

Each case runs `StopOnSignal` in a fresh Python process (no TensorFlow: the stop
flag is a stand-in with `assign`), signals it, and times how it ends.
"""

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.training.conftest import REPO

PREAMBLE = """
import os, signal, time
from bert_tf.training.signals import StopOnSignal

class Flag:
    value = False
    def assign(self, value):
        self.value = value

stop = Flag()
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


def test_a_signal_while_a_step_hangs_ends_the_run_after_its_grace():
    code, out, err, seconds = _run(
        "watch = StopOnSignal(stop, min_grace_seconds=2)\n"
        "watch.loop_started(4)\n"
        "watch.loop_finished(4, 0.2)\n"  # steps of 0.05 s: the grace is the minimum
        "watch.loop_started(4)\n"
        "started = time.monotonic()\n"
        "os.kill(os.getpid(), signal.SIGTERM)\n"
        "time.sleep(1)\n"
        "print('alive after', round(time.monotonic() - started), flush=True)\n"
        "time.sleep(30)\n"
        "print('still running')\n")
    assert code == 128 + signal.SIGTERM, err
    assert "alive after 1" in out and "still running" not in out and seconds < 25
    assert ("the running step had not finished 2 s after it (steps so far took at most "
            "0.1 s): stopped without saving a checkpoint; the same command resumes from the "
            "start (no checkpoint yet)") in err


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
import runpy, sys, time
from bert_tf.training import train_step

build = train_step.TrainStep.__init__

def build_hung(self, *args, **kwargs):
    build(self, *args, **kwargs)
    # The first step never returns, as a worker starved of input spins in it.
    self.train_loop = lambda iterator, num_steps: time.sleep(3600)

train_step.TrainStep.__init__ = build_hung
sys.argv = ["bert_tf.train", *sys.argv[1:]]
runpy.run_module("bert_tf.train", run_name="__main__")
"""


def test_sigterm_ends_a_trainer_hung_in_its_first_step(write_config, tmp_path):
    config = write_config()
    process = subprocess.Popen(
        [sys.executable, "-c", HUNG_TRAINER, "--config", config, "--model_dir",
         str(tmp_path / "run")], cwd=REPO, text=True, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="2"))
    output = []
    try:
        for line in process.stdout:
            output.append(line)
            if "tracing the training step" in line:
                break
        time.sleep(1)
        signalled = time.monotonic()
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=60)
        seconds = time.monotonic() - signalled
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
