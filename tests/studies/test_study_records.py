"""A study's durable records: finished runs kept without checkpoints, and restored."""

import json
import os

import pytest
import yaml

from bert_tf.studies import records, runner, units
from bert_tf.studies import spec as spec_lib
from bert_tf.studies.units import TrainUnit

ENCODER = {"vocab_size": 30522, "hidden_size": 32, "num_layers": 2, "num_heads": 2,
           "intermediate_size": 64}


def _run_folder(model_dir, metrics, steps=10, reached=None, extra=None):
    """A trainer run folder: config, evaluation at step `reached`, curves, a checkpoint."""
    os.makedirs(os.path.join(model_dir, "train"), exist_ok=True)
    with open(os.path.join(model_dir, "params.yaml"), "w") as f:
        yaml.safe_dump({"trainer": {"train_steps": steps}, **(extra or {})}, f)
    with open(os.path.join(model_dir, "eval_results.json"), "w") as f:
        json.dump({"step": steps if reached is None else reached, "metrics": metrics}, f)
    with open(os.path.join(model_dir, "unit_times.jsonl"), "w") as f:
        f.write('{"seconds": 12.5, "exit_code": 0}\n')
    with open(os.path.join(model_dir, "train", "events.out.tfevents.1.host.0.v2"), "wb") as f:
        f.write(b"curves")
    for name in ("ckpt-10.index", "ckpt-10.data-00000-of-00001", "checkpoint", "vocab.txt"):
        with open(os.path.join(model_dir, name), "wb") as f:
            f.write(b"weights")


def test_only_finished_runs_are_recorded_and_without_their_checkpoints(tmp_path):
    out, kept = tmp_path / "out", tmp_path / "records"
    _run_folder(str(out / "finetune" / "a" / "stsb" / "lr0.0001_seed0"), {"pearson": 0.5})
    _run_folder(str(out / "finetune" / "a" / "stsb" / "lr5e-05_seed0"), {"pearson": 0.4},
                reached=5)  # stopped halfway: not finished
    (out / "report.md").write_text("# report\n")
    (out / "plots").mkdir()
    (out / "plots" / "dev_scores.png").write_bytes(b"\x89PNG")

    assert records.save(str(out), str(kept)) == ["finetune/a/stsb/lr0.0001_seed0"]
    run = kept / "finetune" / "a" / "stsb" / "lr0.0001_seed0"
    assert sorted(str(p.relative_to(run)) for p in run.rglob("*") if p.is_file()) == [
        "eval_results.json", "params.yaml", "train/events.out.tfevents.1.host.0.v2",
        "unit_times.jsonl"]
    assert not (kept / "finetune" / "a" / "stsb" / "lr5e-05_seed0").exists()
    assert (kept / "report.md").read_text() == "# report\n"
    assert (kept / "plots" / "dev_scores.png").read_bytes() == b"\x89PNG"

    # Saving again leaves equal files alone and picks up the report's new text.
    os.utime(run / "params.yaml", (1, 1))
    (out / "report.md").write_text("# report, later\n")
    records.save(str(out), str(kept))
    assert os.stat(run / "params.yaml").st_mtime == 1
    assert (kept / "report.md").read_text() == "# report, later\n"


def test_restored_runs_count_as_finished_and_supersede_unfinished_ones(tmp_path):
    kept, out = tmp_path / "records", tmp_path / "new_machine"
    for rate, pearson in (("0.0001", 0.5), ("5e-05", 0.4), ("3e-05", 0.3)):
        _run_folder(str(kept / "finetune" / "a" / "stsb" / f"lr{rate}_seed0"),
                    {"pearson": pearson})
    # This machine finished the third run itself and stopped the second halfway.
    _run_folder(str(out / "finetune" / "a" / "stsb" / "lr5e-05_seed0"), {"pearson": 0.1},
                reached=5)
    _run_folder(str(out / "finetune" / "a" / "stsb" / "lr3e-05_seed0"), {"pearson": 0.25})
    messages = []

    assert records.restore(str(kept), str(out), messages.append) == [
        "finetune/a/stsb/lr0.0001_seed0", "finetune/a/stsb/lr5e-05_seed0"]
    restored = TrainUnit("u", str(out / "finetune" / "a" / "stsb" / "lr0.0001_seed0"),
                         "no/such/config.yaml")
    # The config does not exist: running would fail, so the result proves nothing ran.
    assert restored.run(log=lambda message: None) == {"step": 10, "metrics": {"pearson": 0.5}}
    superseded = out / "finetune" / "a" / "stsb" / "lr5e-05_seed0"
    assert json.loads((superseded / "eval_results.json").read_text())["metrics"] == {
        "pearson": 0.4}
    assert not (superseded / "checkpoint").exists()
    # What the unfinished run left is moved aside, not deleted.
    [aside] = [p for p in superseded.iterdir() if p.name.startswith("unfinished-")]
    assert json.loads((aside / "eval_results.json").read_text())["step"] == 5
    assert (aside / "ckpt-10.index").read_bytes() == b"weights"
    assert str(aside) in messages[0]
    # A run finished here keeps its own result.
    assert json.loads((out / "finetune" / "a" / "stsb" / "lr3e-05_seed0" /
                       "eval_results.json").read_text())["metrics"] == {"pearson": 0.25}
    assert records.restore(str(kept), str(out)) == []
    assert records.restore(str(tmp_path / "no_records"), str(out)) == []


def test_a_run_training_in_another_process_is_not_restored_over(tmp_path):
    kept, out = tmp_path / "records", tmp_path / "out"
    _run_folder(str(kept / "finetune" / "a" / "stsb" / "lr0.0001_seed0"), {"pearson": 0.5})
    running = out / "finetune" / "a" / "stsb" / "lr0.0001_seed0"
    _run_folder(str(running), {"pearson": 0.1}, reached=5)
    with units.lock_file(str(running / units.LOCK_FILE), wait=False) as held:
        assert held is not None
        assert records.restore(str(kept), str(out)) == []
    assert json.loads((running / "eval_results.json").read_text())["step"] == 5
    assert not [p for p in running.iterdir() if p.name.startswith("unfinished-")]


def test_a_restored_pretraining_without_weights_is_named_before_its_arm_runs(tmp_path,
                                                                           monkeypatch):
    spec = spec_lib.load_study("pretrain_vs_random")
    kept = tmp_path / "records"
    _run_folder(str(kept / "pretraining" / "mlm_nsp"), {"mlm_accuracy": 0.1},
                extra={"model": {"encoder": ENCODER},
                       "data": {"vocab_file": "/v/vocab.txt", "lower_case": True}})
    study = runner.Study(spec, str(tmp_path / "out"), log=lambda message: None,
                         records_dir=str(kept))
    records.restore(study.records_dir, study.out_dir)
    for name in ("checkpoint", "ckpt-10.index"):
        assert not os.path.exists(os.path.join(study.pretraining_dir("mlm_nsp"), name))
    pretrained, stsb = spec.arms[0], spec.suite.tasks[0]
    monkeypatch.setattr(TrainUnit, "_train", lambda *args: pytest.fail("trained from nothing"))
    with pytest.raises(FileNotFoundError, match="arm 'pretrained' fine-tunes from "
                                                "pretraining/mlm_nsp, which is finished but "
                                                "has no checkpoint"):
        study.run_suite_cell(pretrained, stsb)


def test_the_final_evaluation_is_copied_last(tmp_path):
    # It marks a run finished: a copy cut short must not leave a "finished" run without curves.
    run = tmp_path / "run"
    _run_folder(str(run), {"pearson": 0.5})
    assert records._record_paths(str(run))[-1] == "eval_results.json"
