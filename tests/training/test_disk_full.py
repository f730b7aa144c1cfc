"""A checkpoint save that runs out of disk space: one clear line, nothing lost.

The run's model_dir sits on a small tmpfs (real ENOSPC from the kernel, not a
mock), sized so the first checkpoint fits and the second does not. Mounting
needs root (as on CI); elsewhere the test is skipped, or fails under
BERT_TF_REQUIRE_DATA=1 like every other missing prerequisite.
"""

import contextlib
import glob
import os
import subprocess

import pytest
import tensorflow as tf
from conftest import run_train

from tests.helpers import REQUIRE_DATA

# Real trainer processes killed, signalled or starved mid-run: the second test command.
pytestmark = [pytest.mark.slow, pytest.mark.long]


@contextlib.contextmanager
def small_tmpfs(path, megabytes):
    os.makedirs(path)
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs", path],
                           capture_output=True, text=True, check=False)
    if mount.returncode != 0:
        message = f"cannot mount a tmpfs (needs root): {mount.stderr.strip()}"
        if REQUIRE_DATA:
            pytest.fail(message)
        pytest.skip(message)
    try:
        yield path
    finally:
        subprocess.run(["umount", path], check=False)


def remount(path, megabytes):
    subprocess.run(["mount", "-o", f"remount,size={megabytes}m", path], check=True)


def test_disk_full_keeps_the_last_checkpoint_and_cleans_up(write_config, tmp_path):
    config = write_config(trainer={"train_steps": 12, "steps_per_loop": 4, "checkpoint_every": 4,
                                   "eval_every": 100, "max_to_keep": 2})
    # The tiny model's checkpoint (weights + Adam moments, vocab 30,522 x hidden 32)
    # takes about 12 MB: 20 MB holds the first and not the second.
    with small_tmpfs(str(tmp_path / "disk"), 20) as disk:
        model_dir = os.path.join(disk, "run")
        result = run_train(config, model_dir)
        assert result.returncode != 0
        assert "Traceback" not in result.stderr, result.stderr[-3000:]
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1, result.stderr[-3000:]
        assert "no space left" in errors[0] and model_dir in errors[0]
        assert "MB free" in errors[0] and "needs about" in errors[0]
        latest = tf.train.latest_checkpoint(model_dir)
        assert latest is not None and latest.endswith("ckpt-4"), latest
        assert not glob.glob(os.path.join(model_dir, "*_temp")), os.listdir(model_dir)
        tf.train.load_checkpoint(latest).get_variable_to_shape_map()  # still readable

        # A save killed half-way leaves a `_temp` directory too: the next start removes it.
        os.makedirs(os.path.join(model_dir, "ckpt-8_temp"))
        remount(disk, 200)
        result = run_train(config, model_dir)
        assert result.returncode == 0, result.stderr[-3000:]
        assert tf.train.latest_checkpoint(model_dir).endswith("ckpt-12")
        assert not glob.glob(os.path.join(model_dir, "*_temp")), os.listdir(model_dir)
