"""`evaluate` / `predict`: dev prediction files, and impossible options refused up front.

Two short GLUE runs (MRPC, STS-B) of a tiny encoder on a few real examples;
the refusals are checked to come before any model is built.
"""

import csv
import json
import os

import pytest

from bert_tf import evaluate, predict
from bert_tf.data import glue as glue_data
from bert_tf.tasks import glue_metrics
from tests.finetune_helpers import finetune
from tests.helpers import one_line_refusal, require

NUM_DEV = 12


def _run(config_name, task_dir, tmp_path_factory, checkpoint):
    from tests import shared_data

    require(shared_data.data_path("glue", task_dir, "dev.tsv"), "shared data file")
    model_dir = tmp_path_factory.mktemp(config_name) / "run"
    code = finetune(config_name, model_dir, checkpoint, **{
        "data.max_train_examples": 16, "data.max_eval_examples": NUM_DEV,
        "data.max_seq_length": 32, "trainer.train_steps": 2,
        "trainer.global_batch_size": 8})
    assert code == 0
    return str(model_dir)


@pytest.fixture(scope="module")
def mrpc_run(tmp_path_factory, tiny_checkpoint):
    return _run("glue_mrpc", "MRPC", tmp_path_factory, tiny_checkpoint)


@pytest.fixture(scope="module")
def stsb_run(tmp_path_factory, tiny_checkpoint):
    return _run("glue_stsb", "STS-B", tmp_path_factory, tiny_checkpoint)


def _rows(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def _printed_metrics(stdout):
    return {name: float(value) for name, value in
            (line.split(" ") for line in stdout.splitlines() if not line.startswith("predictions"))}


def _write_dev_predictions(command, run, out, capsys, filename):
    """Runs `command` on `run`'s dev set; (printed metrics, TSV rows, dev examples, task)."""
    assert command(["--model_dir", run, "--split", "dev", "--output_dir", str(out)]) == 0
    printed = _printed_metrics(capsys.readouterr().out)
    task = evaluate.load_task(run)
    return printed, _rows(out / filename), task.examples("dev"), task.data.task_name


@pytest.mark.slow
def test_evaluate_dev_writes_ids_predictions_and_gold_labels(mrpc_run, tmp_path, capsys):
    out = tmp_path / "preds"
    printed, rows, examples, task_name = _write_dev_predictions(
        evaluate.main, mrpc_run, out, capsys, "MRPC_dev_predictions.tsv")
    assert rows[0] == ["index", "prediction", "label"]
    assert [row[0] for row in rows[1:]] == [e.guid for e in examples]
    assert [row[2] for row in rows[1:]] == [e.label for e in examples]
    spec = glue_data.task_spec(task_name)
    assert {row[1] for row in rows[1:]} <= set(spec.label_names)
    # The file is what was scored: its predictions give the printed metrics.
    ids = lambda column: [spec.label_names.index(row[column]) for row in rows[1:]]  # noqa: E731
    recomputed = glue_metrics.compute(task_name, ids(2), ids(1))
    assert set(printed) == {"f1", "accuracy"}
    for name, value in printed.items():
        assert value == pytest.approx(recomputed[name], abs=1e-4)
    assert json.loads((out / "metrics_dev.json").read_text()) == pytest.approx(recomputed)


# An STS-B run of its own (about 60 s); the MRPC test above writes dev predictions fast.
@pytest.mark.long
def test_stsb_dev_predictions_are_the_scored_scores(stsb_run, tmp_path, capsys):
    out = tmp_path / "preds"
    printed, rows, examples, _ = _write_dev_predictions(
        predict.main, stsb_run, out, capsys, "STS-B_dev_predictions.tsv")
    assert len(rows) == NUM_DEV + 1
    assert [float(row[2]) for row in rows[1:]] == pytest.approx([e.label for e in examples])
    scores = [float(row[1]) for row in rows[1:]]
    recomputed = glue_metrics.compute("stsb", [float(row[2]) for row in rows[1:]], scores)
    assert set(printed) == {"pearson", "spearman"}
    for name, value in printed.items():
        assert value == pytest.approx(recomputed[name], abs=1e-3)


@pytest.fixture
def no_model(monkeypatch):
    """Fails the test if a model is built: refusals must come first."""
    def refuse(*args):
        raise AssertionError("a model was built before the options were checked")

    monkeypatch.setattr(evaluate, "restore_model", refuse)


@pytest.mark.slow
@pytest.mark.parametrize("command, options, message", [
    (predict.main, ["--split", "dev_matched", "--output_dir", "{out}"],
     "GLUE task 'mrpc' has no split 'dev_matched'; expected one of"),
    (evaluate.main, ["--split", "test"],
     "the test split of 'mrpc' has no labels, so it has no metrics"),
    (evaluate.main, ["--input_file", "dev.tsv"], "a 'glue' run takes --split, not --input_file"),
    (evaluate.main, ["--split", "dev", "--split", "dev"], "--split dev is given twice"),
    (evaluate.main, ["--batch_size", "0"], "--batch_size must be at least 1, got 0"),
    (predict.main, ["--output_dir", "{file}"], "is a file, not a directory"),
])
def test_impossible_options_are_refused_before_the_model(mrpc_run, tmp_path, capsys, no_model,
                                                         command, options, message):
    (tmp_path / "a_file").write_text("")
    options = [option.format(out=tmp_path / "out", file=tmp_path / "a_file")
               for option in options]
    line = one_line_refusal(command, ["--model_dir", mrpc_run, *options], capsys)
    assert message in line
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_predict_without_a_test_file_is_refused(mrpc_run, tmp_path, capsys, no_model):
    """A GLUE folder holding only the dev file: predict's default (test) has nothing to read."""
    from tests import shared_data

    (tmp_path / "glue" / "MRPC").mkdir(parents=True)
    os.symlink(shared_data.data_path("glue", "MRPC", "dev.tsv"),
               tmp_path / "glue" / "MRPC" / "dev.tsv")
    line = one_line_refusal(predict.main, ["--model_dir", mrpc_run, "--output_dir",
                                   str(tmp_path / "out"), "--set",
                                   f"data.data_dir={tmp_path / 'glue'}"], capsys)
    assert line == (f"error: no test file for GLUE task 'mrpc': "
                    f"{tmp_path / 'glue' / 'MRPC' / 'test.tsv'} does not exist")


def test_a_missing_model_dir_is_named(tmp_path, capsys):
    missing = tmp_path / "runs" / "mrpc"
    line = one_line_refusal(evaluate.main, ["--model_dir", str(missing)], capsys)
    assert line == (f"error: --model_dir {missing} does not exist; expected a fine-tuning "
                    "run's model_dir (params.yaml and ckpt-N files)")


def _config_task(config_name, checkpoint, **values):
    """A validated task of a config (no training)."""
    from bert_tf import tasks
    from tests.finetune_helpers import config_overrides, config_path

    task_class, experiment = tasks.load_experiment(
        config_path(config_name), config_overrides(config_name, **values))
    task = task_class(experiment)
    task.resolve(checkpoint)
    task.validate()
    return task


@pytest.fixture
def swag_task(tiny_checkpoint, shared_file):
    sample = shared_file("swag", "swag_sample_hf_format.jsonl")
    return _config_task("swag", tiny_checkpoint, **{"data.train_file": sample,
                                                    "data.eval_file": sample})


def test_file_tasks_take_input_files_not_splits(swag_task):
    with pytest.raises(ValueError, match=r"a 'swag' run takes --input_file, not --split "
                                         r"\(--split dev\)"):
        evaluate.requested_sources(swag_task, ["dev"], [])
    with pytest.raises(ValueError, match="predict on a 'swag' run needs --input_file"):
        evaluate.requested_sources(swag_task, [], [], predicting=True)
    # evaluate's default: the run's own evaluation file.
    assert evaluate.requested_sources(swag_task, [], []) == []


def test_a_missing_input_file_is_named(swag_task, tmp_path):
    missing = str(tmp_path / "val.csv")
    with pytest.raises(FileNotFoundError, match=f"evaluation file {missing} does not exist"):
        swag_task.check_sources([missing])


def test_files_reported_under_one_name_are_refused(tiny_checkpoint, shared_file, tmp_path):
    testa = shared_file("conll2003", "eng.testa")
    task = _config_task("ner_conll2003", tiny_checkpoint)
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        os.symlink(testa, tmp_path / folder / "eng.testa")
    first, second = str(tmp_path / "a" / "eng.testa"), str(tmp_path / "b" / "eng.testa")
    task.check_sources([first])
    with pytest.raises(ValueError, match=f"{first} and {second} would both be reported and "
                                         "written as 'eng.testa'"):
        task.check_sources([first, second])


def test_squad_writes_one_predictions_json_per_directory(tiny_checkpoint, shared_file, tmp_path):
    dev = shared_file("squad", "dev-v1.1.json")
    task = _config_task("squad_v1", tiny_checkpoint, **{"data.train_file": dev,
                                                        "data.eval_file": dev})
    other = str(tmp_path / "other.json")
    os.symlink(dev, other)
    task.check_sources([dev, other])  # metrics only: fine
    task.check_sources([dev], str(tmp_path / "out"))
    with pytest.raises(ValueError, match="one file per output directory"):
        task.check_sources([dev, other], str(tmp_path / "out"))


def test_predict_defaults_to_every_test_split(tiny_checkpoint):
    """MNLI has two test splits and no split called "test"."""
    task = _config_task("glue_mnli", tiny_checkpoint)
    assert evaluate.requested_sources(task, [], [], predicting=True) == [
        "test_matched", "test_mismatched"]
    assert evaluate.requested_sources(task, [], []) == []  # evaluate: the run's dev splits
