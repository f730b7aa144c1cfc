"""The study command with `--profile ci`: the study's machinery end to end.

The CI profile is the measured study's command on a tiny configuration (a
32-wide encoder, 8 pretraining steps, one task, one learning rate, one seed);
it measures nothing, it proves that corpus, pretraining, both arms, the report
and the resume work together.
"""

import json
import os
import subprocess
import sys

import pytest
import yaml

from bert_tf.checkpoints import native
from research import portable_paths
from research.studies import spec as spec_lib

pytestmark = pytest.mark.long


def _run(out, study="pretrain_vs_random", *extra):
    command = [sys.executable, "-m", "research.study", study, "--out",
               str(out), "--profile", "ci", *extra]
    env = {"TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1"}
    result = subprocess.run(command, cwd=spec_lib.REPO_ROOT, env=dict(os.environ, **env),
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def test_ci_profile_runs_every_stage_and_resumes(tmp_path, shared_file):
    shared_file("vocab", "bert-base-uncased-vocab.txt")
    shared_file("glue", "STS-B", "train.tsv")
    out, kept = tmp_path / "study", tmp_path / "records"
    first = _run(out, "pretrain_vs_random", "--records", str(kept), "--keep_weights")
    assert first.count(": running") == 3  # pretraining, then each arm's one run
    results = json.loads((out / "results.json").read_text())
    (pretraining,) = results["pretraining"]
    assert pretraining["final_eval"]["step"] == 8
    assert set(pretraining["final_eval"]["metrics"]) >= {"mlm_accuracy", "nsp_accuracy",
                                                         "mlm_perplexity"}
    assert [c["arm"] for c in results["finetuning"]] == ["pretrained", "random_init"]
    for cell in results["finetuning"]:
        assert cell["complete"] and cell["main_metric"] == "pearson"
        assert cell["chosen_learning_rate"] == 1e-4 and len(cell["seed_scores"]) == 1
    # The twin has the pretrained model's encoder and vocabulary, not its weights.
    pretrained_params = yaml.safe_load(
        (out / "pretraining" / "mlm_nsp" / "params.yaml").read_text())
    twin_params = yaml.safe_load(
        (out / "finetune" / "random_init" / "stsb" / "lr0.0001_seed0" / "params.yaml").read_text())
    finetuned_params = yaml.safe_load(
        (out / "finetune" / "pretrained" / "stsb" / "lr0.0001_seed0" / "params.yaml").read_text())
    for params in (twin_params, finetuned_params):
        assert params["model"]["encoder"] == pretrained_params["model"]["encoder"]
        # The same vocabulary: a run may read it from the checkpoint's copy.
        with open(params["data"]["vocab_file"], "rb") as mine, \
                open(pretrained_params["data"]["vocab_file"], "rb") as pretraining:
            assert mine.read() == pretraining.read()
    report = (out / "report.md").read_text()
    assert "| stsb | pearson |" in report and "Held-out at step 8" in report
    for plot in ("pretraining.png", "dev_scores.png"):
        assert (out / "plots" / plot).read_bytes()[:4] == b"\x89PNG"
    # The records hold the report (its machine paths portable), the three runs and the
    # pretraining's final weights (no training checkpoints, no fine-tuned weights).
    assert (kept / "report.md").read_text() == portable_paths.portable(report, str(out))
    assert not list(kept.rglob("ckpt-*")) and not list(kept.rglob("*.weights.h5"))
    assert [p.relative_to(kept).as_posix() for p in kept.rglob("weights.index")] == [
        "pretraining/mlm_nsp/weights.index"]
    # Each run's curves as one scalars.json, no TensorBoard event files.
    assert not list(kept.rglob("events.out.tfevents.*"))
    assert len(list(kept.rglob("scalars.json"))) == 3
    # Everything is finished: on a new machine (an empty --out) the records are
    # copied back, nothing trains and the report has the same numbers.
    second = _run(tmp_path / "new_machine", "pretrain_vs_random", "--records", str(kept))
    assert ": running" not in second and "restored 3 finished runs" in second
    again = json.loads((tmp_path / "new_machine" / "results.json").read_text())
    assert [c["seed_scores"] for c in again["finetuning"]] == \
        [c["seed_scores"] for c in results["finetuning"]]
    for key in ("final_eval", "curves", "first_eval", "train_loop_seconds"):
        assert again["pretraining"][0][key] == results["pretraining"][0][key], key
    # The restored pretraining holds the weights its arm fine-tuned from.
    trained, _ = native.load_model(str(out / "pretraining" / "mlm_nsp"))  # from ckpt-8
    restored, _ = native.load_model(str(tmp_path / "new_machine" / "pretraining" / "mlm_nsp"))
    restored_weights = native.weights_dict(restored)
    for name, variable in native.weights_dict(trained).items():
        assert (restored_weights[name].numpy() == variable.numpy()).all(), name


def test_a_fine_tuning_only_study_needs_no_corpus(tmp_path, shared_file):
    shared_file("glue", "MRPC", "train.tsv")
    out = tmp_path / "packing_parity"
    assert _run(out, "packing_parity").count(": running") == 1  # MiniLM, MRPC packed
    results = json.loads((out / "results.json").read_text())
    (cell,) = results["finetuning"]
    assert (cell["arm"], cell["task"], cell["complete"]) == ("minilm", "mrpc_packed", True)
    params = yaml.safe_load((out / "finetune" / "minilm" / "mrpc_packed" / "lr5e-05_seed0"
                             / "params.yaml").read_text())
    assert params["data"]["max_sequences_per_row"] == 8
    assert params["trainer"]["global_batch_size"] == 4
    assert not (out / "corpus").exists() and results["corpus"] is None
    report = (out / "report.md").read_text()
    assert "## Corpus" not in report and "| mrpc_packed | f1 |" in report
    assert not (out / "plots" / "pretraining.png").exists()


def test_ablation_tables_pretrain_each_row_and_sit_beside_the_paper(tmp_path, shared_file):
    shared_file("vocab", "bert-base-uncased-vocab.txt")
    shared_file("conll2003", "eng.train")
    out = tmp_path / "ablations"
    first = _run(out, "ablations")
    # Two pretraining rows, each fine-tuned once on feature-based NER.
    assert first.count(": running") == 4
    masked = yaml.safe_load((out / "pretraining" / "mask_0_0_100" / "params.yaml").read_text())
    assert (masked["data"]["mask_token_fraction"], masked["data"]["keep_token_fraction"],
            masked["data"]["random_token_fraction"]) == (0.0, 0.0, 1.0)
    run = out / "finetune" / "mask_0_0_100" / "ner_features" / "lr0.001_seed0"
    params = yaml.safe_load((run / "params.yaml").read_text())
    # The task's own learning rate, not the suite's.
    assert params["optimizer"]["learning_rate"] == 1e-3
    assert params["model"]["feature_mix"] == "concat_last_four"
    results = json.loads((out / "results.json").read_text())
    (table,) = results["tables"]
    assert [row["label"] for row in table["rows"]] == ["80/10/10", "0/0/100"]
    for row in table["rows"]:
        assert row["values"]["mlm_perplexity"] > 1
        assert row["values"]["ner_features"]["seeds"] == 1
    report = (out / "report.md").read_text()
    assert "| row | mlm_perplexity | ner_features eng.testa/f1 | paper: NER feature-based |" \
        in report
    assert "| 0/0/100 |" in report and "| 94.6 |" in report
    assert (out / "plots" / "table8_masking.png").read_bytes()[:4] == b"\x89PNG"
    assert ": running" not in _run(out, "ablations")


def test_the_feature_based_table_reports_dev_and_test(tmp_path, shared_file):
    shared_file("conll2003", "eng.train")
    out = tmp_path / "feature_based"
    assert _run(out, "feature_based").count(": running") == 1
    results = json.loads((out / "results.json").read_text())
    ((row,),) = [table["rows"] for table in results["tables"]]
    assert (row["arm"], row["task"]) == ("minilm", "sum_last_four")
    assert set(row["values"]) == {"eng.testa/f1", "eng.testb/f1"}
    assert all(0 <= value["mean"] <= 1 for value in row["values"].values())
    assert "| row | eng.testa/f1 | eng.testb/f1 | paper: Dev F1 | paper: Test F1 |" in \
        (out / "report.md").read_text()
