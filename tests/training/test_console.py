"""The training console: TensorFlow's start-up and checkpoint noise only with --verbose."""

import pytest
from conftest import run_train, train_env

pytestmark = pytest.mark.slow

NOISE = ("failed call to cuInit", "oneDNN supports", "Sharding callback duration")


def test_quiet_by_default_and_verbose_on_request(write_config, tmp_path):
    config = write_config(trainer={"train_steps": 2, "steps_per_loop": 1, "checkpoint_every": 1,
                                   "eval_every": 0})
    env = train_env()
    env.pop("TF_CPP_MIN_LOG_LEVEL")  # as a user's shell has it
    quiet = run_train(config, tmp_path / "quiet", env=env)
    assert quiet.returncode == 0, quiet.stderr[-3000:]
    assert "saved checkpoint" in quiet.stderr  # our own log lines stay
    for noise in NOISE:
        assert noise not in quiet.stderr, noise
    verbose = run_train(config, tmp_path / "verbose", "--verbose", env=env)
    assert verbose.returncode == 0, verbose.stderr[-3000:]
    assert "Sharding callback duration" in verbose.stderr
