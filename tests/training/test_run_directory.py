"""The run directory's files: written and read back, and read without TensorFlow locally."""

import dataclasses
import json
import subprocess
import sys

import pytest
import yaml
from conftest import REPO, train_env

from bert_tf import config as config_lib
from bert_tf import tasks
from bert_tf.training import run_directory

# A sweep's view of two run directories, in a process that must not import TensorFlow.
READ_LOCALLY = """
import json, os, sys
from bert_tf import sweep  # noqa: F401 (what a sweep imports)
from bert_tf.training import run_directory
root = sys.argv[1]
for name, step in (("finished", 4), ("running", 2)):
    folder = os.path.join(root, name)
    os.makedirs(folder)
    with open(os.path.join(folder, "params.yaml"), "w") as f:
        f.write("trainer:\\n  train_steps: 4\\nruntime:\\n  mixed_precision: mixed_bfloat16\\n")
    run_directory.write_eval_results(folder, step, {"accuracy": step / 8})
read = [run_directory.finished_results(os.path.join(root, "finished")),
        run_directory.finished_results(os.path.join(root, "running")),
        run_directory.last_evaluation(os.path.join(root, "running")),
        run_directory.recorded_precision(os.path.join(root, "finished")),
        run_directory.finished_results(os.path.join(root, "absent"))]
print(json.dumps(read))
print("tensorflow" in sys.modules)
"""


def test_sweeps_read_local_run_directories_without_tensorflow(tmp_path):
    result = subprocess.run([sys.executable, "-c", READ_LOCALLY, str(tmp_path)], cwd=REPO,
                            env=train_env(), capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    read, imported = result.stdout.strip().splitlines()
    assert json.loads(read) == [{"step": 4, "metrics": {"accuracy": 0.5}}, None,
                                [2, {"accuracy": 0.25}], "mixed_bfloat16", None]
    assert imported == "False"


def test_params_read_back_as_written_and_nothing_is_read_before_the_run_wrote_it(tmp_path):
    run = str(tmp_path / "run")
    assert run_directory.read_params(run) is None
    assert run_directory.recorded_precision(run) is None
    assert run_directory.last_evaluation(run) == (None, {})
    experiment = tasks.task_class("pretraining").config_class()
    run_directory.write_params(run, experiment)
    with open(tmp_path / "run" / run_directory.PARAMS_FILE) as f:
        assert yaml.safe_load(f) == run_directory.read_params(run)
    assert config_lib.from_dict(type(experiment), run_directory.read_params(run)) == experiment
    assert run_directory.recorded_precision(run) == experiment.runtime.mixed_precision


def _run_with_a_checkpoint(tmp_path, experiment):
    """A run directory holding `experiment`'s params.yaml and one (tiny) checkpoint."""
    import tensorflow as tf

    run = str(tmp_path / "run")
    run_directory.write_params(run, experiment)
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(step=tf.Variable(1)), run, 1)
    manager.save(checkpoint_number=1)
    return run


def test_a_run_resumes_only_with_its_own_model_and_data(tmp_path):
    task_class = tasks.task_class("pretraining")
    experiment = task_class.config_class()
    run = _run_with_a_checkpoint(tmp_path, experiment)
    run_directory.check_resumable(run, experiment, task_class(experiment))

    wider = dataclasses.replace(experiment, model=dataclasses.replace(
        experiment.model, encoder=dataclasses.replace(experiment.model.encoder,
                                                      hidden_size=384)))
    with pytest.raises(run_directory.IncompatibleRunError,
                       match="model.encoder.hidden_size: 768 in the run, 384 in this config"):
        run_directory.check_resumable(run, wider, task_class(wider))

    reseeded = dataclasses.replace(experiment, data=dataclasses.replace(experiment.data, seed=5))
    with pytest.raises(run_directory.IncompatibleRunError,
                       match="data.seed: 0 in the run, 5 in this config.*--allow_data_change"):
        run_directory.check_resumable(run, reseeded, task_class(reseeded))
    run_directory.check_resumable(run, reseeded, task_class(reseeded), allow_data_change=True)
