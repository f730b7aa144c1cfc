"""The training console: TensorFlow's start-up and checkpoint noise only with --verbose.

The quiet default is checked on the first run of training/test_run_guards.py, which
trains anyway; this file checks that --verbose lets the noise through.
"""

import pytest

from tests.training_runs import run_train, train_env

pytestmark = [pytest.mark.slow, pytest.mark.long]


def test_verbose_on_request(write_config, tmp_path):
    # One step and one checkpoint: the checkpoint writer is what logs the sharding line.
    config = write_config(trainer={"train_steps": 1, "steps_per_loop": 1, "checkpoint_every": 1,
                                   "eval_every": 0},
                          data={"eval_holdout_every": 0})  # no final evaluation to wait for
    env = train_env()
    env.pop("TF_CPP_MIN_LOG_LEVEL")  # as a user's shell has it
    verbose = run_train(config, tmp_path, "--verbose", env=env)
    assert verbose.returncode == 0, verbose.stderr[-3000:]
    assert "Sharding callback duration" in verbose.stderr
