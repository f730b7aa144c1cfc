"""`--set trainer.train_steps=N` decides a fine-tuning run's length over the YAML's epochs."""

import logging

import pytest
import yaml

from bert_tf import tasks
from tests.finetune_helpers import config_overrides, config_path, finetune


def test_explicit_train_steps_replace_configured_epochs(caplog):
    path = config_path("glue_rte")
    assert yaml.safe_load(open(path))["trainer"]["train_epochs"] > 0
    with caplog.at_level(logging.INFO):
        _, experiment = tasks.load_experiment(
            path, config_overrides("glue_rte", **{"trainer.train_steps": 30}))
    assert experiment.trainer.train_steps == 30 and experiment.trainer.train_epochs == 0
    assert "replaces trainer.train_epochs" in caplog.text

    # Both given explicitly: the epochs decide, as the trainer logs.
    _, experiment = tasks.load_experiment(path, config_overrides(
        "glue_rte", **{"trainer.train_steps": 30, "trainer.train_epochs": 1}))
    assert experiment.trainer.train_epochs == 1


@pytest.mark.slow
def test_a_run_with_explicit_steps_stops_there(tiny_checkpoint, tmp_path, shared_file, caplog):
    shared_file("glue", "RTE", "train.tsv")
    model_dir = tmp_path / "rte"
    with caplog.at_level(logging.INFO):
        assert finetune("glue_rte", model_dir, tiny_checkpoint, **{
            "trainer.train_steps": 3, "trainer.global_batch_size": 8,
            "data.max_eval_examples": 16}) == 0
    params = yaml.safe_load((model_dir / "params.yaml").read_text())
    assert params["trainer"]["train_steps"] == 3
    assert "trainer.train_steps=3 decides the step count" in caplog.text
