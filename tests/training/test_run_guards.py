"""What protects a run directory: one live trainer, the same data on resume,
a finished run said to be finished, and Ctrl-C handled like SIGTERM."""

import os
import re
import signal
import subprocess
import sys

import pytest
from conftest import REPO, run_train, train_command, train_env

pytestmark = pytest.mark.slow


def start(config, model_dir, *extra):
    # SIGINT back to its default in the child: a CI runner may start us ignoring it.
    return subprocess.Popen(train_command(config, model_dir, *extra), cwd=REPO, env=train_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def wait_for_step(process, step):
    output = []
    for line in process.stdout:
        output.append(line)
        match = re.search(r"step (\d+)/\d+", line)
        if match and int(match.group(1)) >= step:
            return output
    process.wait()
    raise AssertionError(f"the run ended before step {step}:\n" + "".join(output[-40:]))


def error_lines(stderr):
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def test_a_second_trainer_is_refused_and_a_killed_one_leaves_no_lock(write_config, tmp_path):
    config = write_config(trainer={"train_steps": 400, "steps_per_loop": 1,
                                   "checkpoint_every": 400, "eval_every": 0})
    first = start(config, tmp_path)
    try:
        wait_for_step(first, 1)
        second = run_train(config, tmp_path)
        assert second.returncode == 1
        errors = error_lines(second.stderr)
        assert len(errors) == 1 and str(tmp_path) in errors[0] and "in use" in errors[0], \
            second.stderr[-2000:]
        assert f"pid {first.pid}" in errors[0]
    finally:
        first.kill()
        first.wait(timeout=60)
    # SIGKILL released the lock: a new trainer takes the directory.
    third = run_train(write_config(trainer={"train_steps": 2, "steps_per_loop": 1,
                                            "checkpoint_every": 2, "eval_every": 0}), tmp_path)
    assert third.returncode == 0, third.stderr[-3000:]


def test_a_finished_run_says_so_and_resuming_with_other_data_is_refused_unless_allowed(
        write_config, tmp_path):
    config = write_config(trainer={"train_steps": 4, "steps_per_loop": 2, "checkpoint_every": 2,
                                   "eval_every": 4, "eval_steps": 1})
    first = run_train(config, tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    again = run_train(config, tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "was already complete at step 4" in again.stdout
    assert re.search(r"last evaluation: .*mlm_accuracy \d\.\d{4}", again.stdout), again.stdout

    longer = ("--set", "trainer.train_steps=6", "--set", "data.seed=5")
    refused = run_train(config, tmp_path, *longer)
    assert refused.returncode == 1
    errors = error_lines(refused.stderr)
    assert len(errors) == 1 and "data.seed: 0 in the run, 5 in this config" in errors[0], \
        refused.stderr[-2000:]
    assert "--allow_data_change" in errors[0]
    # A longer run with the same data is a plain resume.
    allowed = run_train(config, tmp_path, *longer, "--allow_data_change")
    assert allowed.returncode == 0, allowed.stderr[-3000:]
    assert "finished at step 6" in allowed.stdout


def test_first_ctrl_c_saves_and_resumes_second_aborts(write_config, tmp_path):
    config = write_config(trainer={"train_steps": 400, "steps_per_loop": 1,
                                   "checkpoint_every": 400, "eval_every": 0})
    process = start(config, tmp_path)
    output = wait_for_step(process, 2)
    process.send_signal(signal.SIGINT)
    output += process.stdout.readlines()
    assert process.wait(timeout=120) == 0, "".join(output[-30:])
    log = "".join(output)
    assert "Traceback" not in log and "KeyboardInterrupt" not in log, log[-3000:]
    stopped = int(re.search(r"stopped by SIGINT at step (\d+) after saving", log).group(1))
    assert os.path.exists(os.path.join(tmp_path, f"ckpt-{stopped}.index"))

    result = run_train(config, tmp_path, "--set", "trainer.train_steps=6")
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"resumed from {os.path.join(tmp_path, f'ckpt-{stopped}')}" in result.stderr


def test_a_second_ctrl_c_aborts_at_once():
    """The watcher thread exits on the second SIGINT even while Python is busy elsewhere."""
    script = (
        "import os, signal, time, tensorflow as tf\n"
        "from bert_tf.training.signals import StopOnSignal\n"
        "stop = tf.Variable(False)\n"
        "watch = StopOnSignal(stop)\n"
        "os.kill(os.getpid(), signal.SIGINT)\n"
        "time.sleep(1)\n"
        "assert bool(stop.numpy())\n"
        "os.kill(os.getpid(), signal.SIGINT)\n"
        "time.sleep(30)\n"
        "print('still running')\n")
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=train_env(),
                            capture_output=True, text=True, timeout=120,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert result.returncode == 130, result.stdout + result.stderr[-2000:]
    assert "aborted without saving" in result.stderr
    assert "still running" not in result.stdout
