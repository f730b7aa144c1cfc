"""A study's durable records: finished runs kept without checkpoints, and restored."""

import json
import os
from pathlib import Path

import numpy as np
import pytest
import yaml

from research.studies import corpus as corpus_lib
from research.studies import records, report, runner, scalars, units
from research.studies import spec as spec_lib
from research.studies.units import TrainUnit

ENCODER = {"vocab_size": 30522, "hidden_size": 32, "num_layers": 2, "num_heads": 2,
           "intermediate_size": 64}


def _write_curves(model_dir, loss=1.0):
    """Real TensorBoard event files: a falling training loss, one held-out evaluation."""
    from bert_tf.training.summaries import SummaryWriters

    writers = SummaryWriters(model_dir)
    for step in (5, 10):
        # Values with no short decimal: a record must keep them to the last bit.
        writers.scalars(writers.train, step, {"loss": loss / step, "learning_rate": 1e-4 / 3,
                                              "mlm_accuracy": step / 30, "steps_per_second": 2.5})
        writers.scalars(writers.eval, step, {"mlm_accuracy": step / 70, "mlm_loss": loss / 7})
    writers.close()


def _run_folder(model_dir, metrics, steps=10, reached=None, extra=None, loss=1.0):
    """A trainer run folder: config, evaluation at step `reached`, curves, a checkpoint."""
    os.makedirs(model_dir, exist_ok=True)
    with open(os.path.join(model_dir, "params.yaml"), "w") as f:
        yaml.safe_dump({"trainer": {"train_steps": steps}, **(extra or {})}, f)
    with open(os.path.join(model_dir, "eval_results.json"), "w") as f:
        json.dump({"step": steps if reached is None else reached, "metrics": metrics}, f)
    with open(os.path.join(model_dir, "unit_times.jsonl"), "w") as f:
        f.write('{"seconds": 12.5, "exit_code": 0}\n')
    _write_curves(model_dir, loss)
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
    # The curves as one scalars.json: no event files in the records.
    assert sorted(str(p.relative_to(run)) for p in run.rglob("*")) == [
        "eval_results.json", "params.yaml", "scalars.json", "unit_times.jsonl"]
    trained = out / "finetune" / "a" / "stsb" / "lr0.0001_seed0"
    assert scalars.read(str(run)) == scalars.read(str(trained))
    assert scalars.read(str(run))["train"]["loss"] == [(5, pytest.approx(0.2)),
                                                       (10, pytest.approx(0.1))]
    assert not (kept / "finetune" / "a" / "stsb" / "lr5e-05_seed0").exists()
    assert (kept / "report.md").read_text() == "# report\n"
    assert (kept / "plots" / "dev_scores.png").read_bytes() == b"\x89PNG"

    # Saving again leaves equal files alone (the scalars are not read from the events
    # again) and picks up the report's new text.
    for path in (run / "params.yaml", run / "scalars.json", trained / "scalars.json"):
        os.utime(path, (1e9, 1e9))
    for path in scalars.event_files(str(trained)):
        os.utime(path, (1e9 - 1, 1e9 - 1))
    (out / "report.md").write_text("# report, later\n")
    records.save(str(out), str(kept))
    for path in (run / "params.yaml", run / "scalars.json", trained / "scalars.json"):
        assert os.stat(path).st_mtime == 1e9
    assert (kept / "report.md").read_text() == "# report, later\n"


def test_a_report_from_a_record_has_the_curves_of_the_event_files(tmp_path):
    out, kept, new_machine = tmp_path / "out", tmp_path / "records", tmp_path / "new_machine"
    params = {"model": {"encoder": ENCODER, "use_nsp": False},
              "trainer": {"train_steps": 10, "global_batch_size": 8},
              "data": {"max_seq_length": 32, "vocab_file": "/v/vocab.txt"},
              "optimizer": {"learning_rate": 1e-4, "warmup_steps": 1},
              "runtime": {"mixed_precision": "float32"}}
    trained = out / "pretraining" / "mlm"
    _run_folder(str(trained), {"mlm_accuracy": 0.2, "mlm_loss": 1 / 7}, extra=params)
    records.save(str(out), str(kept))
    assert records.restore(str(kept), str(new_machine)) == ["pretraining/mlm"]
    restored = new_machine / "pretraining" / "mlm"
    assert not scalars.event_files(str(restored))

    from_events = report.pretraining_summary("mlm", str(trained))
    from_record = report.pretraining_summary("mlm", str(restored))
    assert from_events["curves"]["eval"]["mlm_accuracy"][1] == (10, float(np.float32(10 / 70)))
    assert from_events["train_loop_seconds"] == pytest.approx(4.0)
    assert from_events.pop("model_dir") != from_record.pop("model_dir")
    assert from_record == from_events  # curves, first evaluation, loop seconds: bit for bit
    # The metrics in the order the events hold them, as results.json lists them.
    order = list(scalars.read(str(trained))["train"])
    assert order == ["loss", "learning_rate", "mlm_accuracy", "steps_per_second"]
    assert list(scalars.read(str(restored))["train"]) == order


def test_records_saved_with_event_files_are_converted(tmp_path):
    old, out = tmp_path / "records", tmp_path / "out"
    _run_folder(str(old / "finetune" / "a" / "stsb" / "lr0.0001_seed0"), {"pearson": 0.5})
    record = old / "finetune" / "a" / "stsb" / "lr0.0001_seed0"
    curves = scalars.read(str(record))
    records.restore(str(old), str(out))
    records.save(str(out), str(old))
    assert not scalars.event_files(str(record)) and not (record / "train").exists()
    assert scalars.read(str(record)) == curves
    assert scalars.read(str(out / "finetune" / "a" / "stsb" / "lr0.0001_seed0")) == curves


def test_scalars_json_keeps_float32_values_exactly_and_compactly(tmp_path):
    values = [0.1, 1 / 3, 1e-8, 3.0e38, -2.5, 0.0, 123456.789, float("nan"), float("inf")]
    curves = {"train": {"loss": [(i, float(np.float32(v))) for i, v in enumerate(values)]},
              "eval": {}}
    text = scalars.dumps(curves)
    assert len(text.splitlines()) == 6  # one line per series
    assert "0.33333334" in text and "0.3333333432674408" not in text
    (tmp_path / "scalars.json").write_text(text)
    back = scalars.read(str(tmp_path))
    assert back["eval"] == {}
    for (step, value), (step_back, value_back) in zip(curves["train"]["loss"],
                                                      back["train"]["loss"], strict=True):
        assert step_back == step
        assert value_back == value or (np.isnan(value) and np.isnan(value_back))


def test_event_files_come_before_a_scalars_json(tmp_path):
    _write_curves(str(tmp_path), loss=2.0)
    (tmp_path / "scalars.json").write_text('{"train": {"loss": [[5, 9.0]]}, "eval": {}}')
    assert scalars.read(str(tmp_path))["train"]["loss"] == [(5, pytest.approx(0.4)),
                                                            (10, pytest.approx(0.2))]
    assert scalars.read(str(tmp_path / "nothing")) == {"train": {}, "eval": {}}


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


def test_a_run_a_trainer_holds_is_not_restored_over(tmp_path):
    from bert_tf.training.run_lock import RunLock

    kept, out = tmp_path / "records", tmp_path / "out"
    _run_folder(str(kept / "finetune" / "a" / "stsb" / "lr0.0001_seed0"), {"pearson": 0.5})
    running = out / "finetune" / "a" / "stsb" / "lr0.0001_seed0"
    _run_folder(str(running), {"pearson": 0.1}, reached=5)
    lock = RunLock(str(running))  # `python -m bert_tf.train` started by hand in the folder
    try:
        assert records.restore(str(kept), str(out)) == []
    finally:
        lock.release()
    assert json.loads((running / "eval_results.json").read_text())["step"] == 5
    assert records.restore(str(kept), str(out)) == ["finetune/a/stsb/lr0.0001_seed0"]


def test_a_weightless_pretraining_some_runs_used_is_named_before_its_arm_runs(tmp_path,
                                                                            monkeypatch):
    spec = spec_lib.load_study("pretrain_vs_random")
    kept = tmp_path / "records"
    _run_folder(str(kept / "pretraining" / "mlm_nsp"), {"mlm_accuracy": 0.1},
                extra={"model": {"encoder": ENCODER},
                       "data": {"vocab_file": "/v/vocab.txt", "lower_case": True}})
    study = runner.Study(spec, str(tmp_path / "out"), log=lambda message: None,
                         records_dir=str(kept))
    pretrained, stsb = spec.arms[0], spec.suite.tasks[0]
    # One run fine-tuned from the recorded weights (on the machine that had them).
    _run_folder(str(kept / "finetune" / "pretrained" / "stsb" / "lr0.0001_seed0"),
                {"pearson": 0.5})
    records.restore(study.records_dir, study.out_dir)
    for name in ("checkpoint", "ckpt-10.index"):
        assert not os.path.exists(os.path.join(study.pretraining_dir("mlm_nsp"), name))
    # Pretraining again would put runs of two models into one cell: it is left as it is.
    study._pretrain_again_if_weights_lost("mlm_nsp")
    assert (tmp_path / "out" / "pretraining" / "mlm_nsp" / "eval_results.json").exists()
    monkeypatch.setattr(TrainUnit, "_train", lambda *args: pytest.fail("trained from nothing"))
    with pytest.raises(FileNotFoundError, match="arm 'pretrained' fine-tunes from "
                                                "pretraining/mlm_nsp, which is finished but "
                                                "has no checkpoint .* and 1 runs already"):
        study.run_suite_cell(pretrained, stsb)


def test_a_weightless_pretraining_no_run_used_is_pretrained_again(tmp_path, monkeypatch,
                                                                  shared_file):
    shared_file("vocab", "bert-base-uncased-vocab.txt")
    spec = spec_lib.load_study("pretrain_vs_random")
    kept = tmp_path / "records"
    _run_folder(str(kept / "pretraining" / "mlm_nsp"), {"mlm_accuracy": 0.1},
                extra={"model": {"encoder": ENCODER},
                       "data": {"vocab_file": "/v/vocab.txt", "lower_case": True}})
    messages, trained = [], []
    study = runner.Study(spec, str(tmp_path / "out"), log=messages.append,
                         records_dir=str(kept), arms=["pretrained"])
    every_main_metric = {study.main_metric(task): 0.5 for task in spec.suite.tasks}

    def train(unit, lock, log):
        trained.append(unit.name)
        if unit.name.startswith("pretraining/"):
            _pretraining_with_checkpoint(Path(unit.model_dir), loss=3.0)  # new curves
        else:
            assert records.has_weights(unit.init_checkpoint)
            _run_folder(unit.model_dir, every_main_metric)
        return unit.results()

    monkeypatch.setattr(TrainUnit, "_train", train)
    study.write_report = lambda corpus: study._save_records()  # no corpus manifest here
    records.restore(study.records_dir, study.out_dir)
    corpus = corpus_lib.CorpusFiles(["train.txt"], ["heldout.txt"], {})
    complete = study._run_pass(corpus)

    assert complete and trained[0] == "pretraining/mlm_nsp"
    assert len(trained) == 1 + 6 * len(spec.suite.tasks)
    run = tmp_path / "out" / "pretraining" / "mlm_nsp"
    [aside] = [p for p in run.iterdir() if p.name.startswith("unfinished-")]
    assert (aside / "eval_results.json").exists() and str(aside) in messages[0]
    # The record now is the new pretraining's: its curves, not the first run's.
    assert scalars.read(str(kept / "pretraining" / "mlm_nsp"))["train"]["loss"] == [
        (5, pytest.approx(0.6)), (10, pytest.approx(0.3))]
    assert not (kept / "pretraining" / "mlm_nsp" / "train").exists()


def test_a_weightless_record_does_not_supersede_a_run_holding_a_checkpoint(tmp_path):
    kept, out = tmp_path / "records", tmp_path / "out"
    _run_folder(str(kept / "pretraining" / "mlm_nsp"), {"mlm_accuracy": 0.1})
    for name in ("ckpt-10.index", "ckpt-10.data-00000-of-00001", "checkpoint"):
        os.remove(kept / "pretraining" / "mlm_nsp" / name)
    local = out / "pretraining" / "mlm_nsp"
    _pretraining_with_checkpoint(local)
    (local / "eval_results.json").write_text('{"step": 5, "metrics": {}}')  # unfinished
    messages = []
    assert records.restore(str(kept), str(out), messages.append,
                           weights_needed=["pretraining/mlm_nsp"]) == []
    assert records.has_weights(str(local)) and "goes on here" in messages[0]
    # Without that need the finished record supersedes it, as for any run.
    assert records.restore(str(kept), str(out)) == ["pretraining/mlm_nsp"]


def test_the_final_evaluation_is_copied_last(tmp_path):
    # It marks a run finished: a copy cut short must not leave a "finished" run without curves.
    run = tmp_path / "run"
    _run_folder(str(run), {"pearson": 0.5})
    assert records._record_paths(str(run))[-1] == "eval_results.json"


def _pretraining_with_checkpoint(run_dir, loss=1.0):
    """A finished pretraining run whose `ckpt-3` holds the weights and optimizer-like state."""
    import tensorflow as tf

    from bert_tf.checkpoints import native
    from bert_tf.models import BertEncoder, BertPretrainer
    from tests.helpers import TINY

    _run_folder(str(run_dir), {"mlm_accuracy": 0.1},
                extra={"model": {"encoder": TINY.to_dict()},
                       "data": {"vocab_file": "/v/vocab.txt", "lower_case": True}}, loss=loss)
    for name in ("ckpt-10.index", "ckpt-10.data-00000-of-00001", "checkpoint"):
        os.remove(os.path.join(run_dir, name))
    model = BertPretrainer(BertEncoder.from_encoder_config(TINY))
    native.write_metadata(model, str(run_dir))
    (run_dir / "vocab.txt").write_text("[PAD]\n[UNK]\n")
    weights = native.weights_dict(model)
    # Twice the weights' size beside them, as Adam's two slots are in a real checkpoint.
    slots = {name: tf.Variable(tf.zeros([2, *variable.shape]))
             for name, variable in weights.items()}
    checkpoint = tf.train.Checkpoint(weights=weights, optimizer_slots=slots)
    tf.train.CheckpointManager(checkpoint, str(run_dir), max_to_keep=1).save(checkpoint_number=3)
    return {name: variable.numpy() for name, variable in weights.items()}


def test_kept_weights_travel_with_the_pretraining_record_without_optimizer_state(tmp_path):
    from bert_tf.checkpoints import native

    spec = spec_lib.load_study("pretrain_vs_random")
    out, kept = tmp_path / "out", tmp_path / "records"
    run = out / "pretraining" / "mlm_nsp"
    expected = _pretraining_with_checkpoint(run)
    assert len(expected) > 20  # every weight of a two-layer pretrainer

    assert records.save(str(out), str(kept), keep_weights=["pretraining/mlm_nsp"]) == [
        "pretraining/mlm_nsp"]
    record = kept / "pretraining" / "mlm_nsp"
    assert (record / "weights.index").exists() and not list(record.glob("ckpt-*"))
    kept_bytes = sum(p.stat().st_size for p in record.glob("weights.*"))
    checkpoint_bytes = sum(p.stat().st_size for p in run.glob("ckpt-3.*"))
    assert kept_bytes < checkpoint_bytes / 2  # the optimizer's state stayed behind
    # The weights were written once: saving again leaves them alone.
    os.utime(record / "weights.index", (1, 1))
    records.save(str(out), str(kept), keep_weights=["pretraining/mlm_nsp"])
    assert os.stat(record / "weights.index").st_mtime == 1

    # On a new machine the restored pretraining is what its arm starts from.
    study = runner.Study(spec, str(tmp_path / "new_machine"), log=lambda message: None,
                         records_dir=str(kept))
    assert records.restore(study.records_dir, study.out_dir) == ["pretraining/mlm_nsp"]
    study._require_pretrained_weights(spec.arms[0])
    model, _ = native.load_model(study.pretraining_dir("mlm_nsp"))
    restored = native.weights_dict(model)
    assert sorted(restored) == sorted(expected)
    for name, array in expected.items():
        assert (restored[name].numpy() == array).all(), name


def test_without_keep_weights_only_the_record_is_saved(tmp_path):
    out, kept = tmp_path / "out", tmp_path / "records"
    _pretraining_with_checkpoint(out / "pretraining" / "mlm_nsp")
    records.save(str(out), str(kept))
    record = kept / "pretraining" / "mlm_nsp"
    assert sorted(p.name for p in record.iterdir()) == [
        "eval_results.json", "params.yaml", "scalars.json", "unit_times.jsonl"]


def test_kept_weights_are_copied_before_their_index_and_the_evaluation_last(tmp_path):
    record = tmp_path / "record"
    _run_folder(str(record), {"mlm_accuracy": 0.1})
    for name in ("weights.index", "weights.data-00000-of-00001", "bert_tf_model.json"):
        (record / name).write_bytes(b"w")
    paths = records._record_paths(str(record))
    assert paths[-2:] == ["weights.index", "eval_results.json"]
    assert {"weights.data-00000-of-00001", "bert_tf_model.json", "vocab.txt"} <= set(paths)
    assert not [path for path in paths if path.startswith("ckpt-") or path == "checkpoint"]


def test_weights_cut_short_leave_nothing_half_written(tmp_path, monkeypatch):
    import tensorflow as tf

    out, kept = tmp_path / "out", tmp_path / "records"
    _pretraining_with_checkpoint(out / "pretraining" / "mlm_nsp")

    def full_disk(self, prefix, *args, **kwargs):
        with open(f"{prefix}.data-00000-of-00001", "wb") as f:
            f.write(b"half")
        raise OSError("No space left on device")

    monkeypatch.setattr(tf.train.Checkpoint, "write", full_disk)
    with pytest.raises(OSError, match="No space"):
        records.save(str(out), str(kept), keep_weights=["pretraining/mlm_nsp"])
    record = kept / "pretraining" / "mlm_nsp"
    assert not [p.name for p in record.iterdir() if "partial" in p.name or "weights" in p.name]
    assert not (record / "eval_results.json").exists()  # not taken for a finished record
