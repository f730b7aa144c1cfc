"""`python -m bert_tf.sweep`: one run per grid point, the best dev score picked, resumable."""

import json
import os

import pytest
import yaml

from bert_tf import sweep
from tests.finetune_helpers import REPO, config_overrides


@pytest.mark.slow
@pytest.mark.long
def test_sweep_runs_the_grid_and_keeps_the_best(tiny_checkpoint, tmp_path, shared_file,
                                                capsys):
    shared_file("glue", "SST-2", "train.tsv")
    config = os.path.join(REPO, "configs", "finetune", "glue_sst2.yaml")
    overrides = config_overrides("glue_sst2", **{"data.max_train_examples": 32,
                                                 "data.max_eval_examples": 32,
                                                 "trainer.global_batch_size": 16,
                                                 "data.max_seq_length": 32})
    # The config's learning rate override is replaced by the grid's.
    overrides = [o for o in overrides if not o.startswith("optimizer.learning_rate")]
    args = ["--config", config, "--init_checkpoint", tiny_checkpoint, "--model_dir",
            str(tmp_path / "sweep"), "--learning_rates", "1e-3,1e-5", "--epochs", "1"]
    for override in overrides:
        args += ["--set", override]
    assert sweep.main(args) == 0
    summary = json.loads((tmp_path / "sweep" / "sweep_results.json").read_text())
    assert summary["main_metric"] == "accuracy"
    assert [run["run"] for run in summary["runs"]] == ["lr0.001_epochs1", "lr1e-05_epochs1"]
    scores = {run["run"]: run["metrics"]["accuracy"] for run in summary["runs"]}
    assert summary["best"] == max(scores, key=scores.get)
    for run in summary["runs"]:
        params = yaml.safe_load((tmp_path / "sweep" / run["run"] / "params.yaml").read_text())
        assert float(params["optimizer"]["learning_rate"]) == run["learning_rate"]
    # A second call finds both runs finished and trains nothing.
    capsys.readouterr()
    assert sweep.main(args) == 0
    assert "==" not in capsys.readouterr().out


def test_sweep_refuses_a_config_without_dev_scores(tmp_path, capsys):
    config = os.path.join(REPO, "configs", "pretrain", "demo.yaml")
    checkpoint = tmp_path / "checkpoint"  # present (as a missing one is refused first), unread
    checkpoint.mkdir()
    (checkpoint / "bert_tf_model.json").write_text("{}")
    assert sweep.main(["--config", config, "--init_checkpoint", str(checkpoint),
                       "--model_dir", str(tmp_path / "sweep")]) == 2
    assert "a 'pretraining' config; a sweep compares dev scores" in capsys.readouterr().err
    assert not (tmp_path / "sweep").exists()
