"""What protects a run directory: one live trainer, the same data on resume,
a finished run said to be finished, and Ctrl-C handled like SIGTERM.

The guards are checked along one run directory's life, so that a handful of
trainer processes (each pays TensorFlow's import and the train step's trace)
cover them all.
"""

import os
import re
import signal
import subprocess
import sys

import pytest
from conftest import REPO, run_train, train_command, train_env

from tests.training_runs import TENSORFLOW_NOISE

pytestmark = pytest.mark.slow

# Overrides that keep a trainer running until it is stopped, one step per loop.
RUN_ON = ("--set", "trainer.train_steps=400", "--set", "trainer.steps_per_loop=1",
          "--set", "trainer.checkpoint_every=400", "--set", "trainer.eval_every=0")


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


# A real trainer process stopped mid-run: the second test command.
@pytest.mark.long
def test_a_run_directory_through_its_guards(write_config, tmp_path):
    config = write_config(trainer={"train_steps": 4, "steps_per_loop": 2, "checkpoint_every": 2,
                                   "eval_every": 4, "eval_steps": 1})
    # A run that finishes, with TF_CPP_MIN_LOG_LEVEL unset as in a user's shell: the
    # console stays quiet (tests/test_console.py checks --verbose).
    env = train_env()
    env.pop("TF_CPP_MIN_LOG_LEVEL")
    first = run_train(config, tmp_path, env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "saved checkpoint" in first.stderr  # our own log lines stay
    for noise in TENSORFLOW_NOISE:
        assert noise not in first.stderr, noise

    # A second trainer is refused while one runs; SIGKILL leaves no lock behind.
    running = start(config, tmp_path, *RUN_ON)
    try:
        output = "".join(wait_for_step(running, 5))
        assert f"resumed from {os.path.join(tmp_path, 'ckpt-4')}" in output, output[-3000:]
        second = run_train(config, tmp_path)
        assert second.returncode == 1
        errors = error_lines(second.stderr)
        assert len(errors) == 1 and str(tmp_path) in errors[0] and "in use" in errors[0], \
            second.stderr[-2000:]
        assert f"pid {running.pid}" in errors[0]
    finally:
        running.kill()
        running.wait(timeout=60)

    # The killed trainer saved nothing past step 4; a new trainer takes the directory
    # and says the run is finished.
    again = run_train(config, tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "was already complete at step 4" in again.stdout
    assert re.search(r"last evaluation: .*mlm_accuracy \d\.\d{4}", again.stdout), again.stdout

    # Resuming with other data is refused unless allowed.
    other_data = ("--set", "data.seed=5")
    refused = run_train(config, tmp_path, "--set", "trainer.train_steps=6", *other_data)
    assert refused.returncode == 1
    errors = error_lines(refused.stderr)
    assert len(errors) == 1 and "data.seed: 0 in the run, 5 in this config" in errors[0], \
        refused.stderr[-2000:]
    assert "--allow_data_change" in errors[0]

    # The allowed run resumes; the first Ctrl-C saves and stops it cleanly.
    process = start(config, tmp_path, *other_data, *RUN_ON, "--allow_data_change")
    output = wait_for_step(process, 6)
    process.send_signal(signal.SIGINT)
    output += process.stdout.readlines()
    assert process.wait(timeout=120) == 0, "".join(output[-30:])
    log = "".join(output)
    assert f"resumed from {os.path.join(tmp_path, 'ckpt-4')}" in log, log[-3000:]
    assert "Traceback" not in log and "KeyboardInterrupt" not in log, log[-3000:]
    stopped = int(re.search(r"stopped by SIGINT at step (\d+) after saving", log).group(1))
    assert stopped >= 6
    assert os.path.exists(os.path.join(tmp_path, f"ckpt-{stopped}.index"))

    # The saved run resumes (its data is now seed 5: a plain resume) and finishes.
    result = run_train(config, tmp_path, *other_data,
                       "--set", f"trainer.train_steps={stopped + 2}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"resumed from {os.path.join(tmp_path, f'ckpt-{stopped}')}" in result.stderr
    assert f"finished at step {stopped + 2}" in result.stdout


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
