"""The study runner: arms' weights and vocabulary, the selection rule, finished units skipped."""

import json
import os
import subprocess
import sys
import threading
import time
import types

import pytest
import yaml

from bert_tf import config as config_lib
from research import portable_paths
from research.studies import report, runner
from research.studies import spec as spec_lib
from research.studies.units import LOCK_FILE, TrainUnit, lock_file

ENCODER = {"vocab_size": 30522, "hidden_size": 32, "num_layers": 2, "num_heads": 2,
           "intermediate_size": 64}
# What the report reads of a pretraining run's params.yaml.
PRETRAINING_PARAMS = {"model": {"encoder": ENCODER, "use_nsp": True},
                      "data": {"max_seq_length": 128, "vocab_file": "/v/vocab.txt",
                               "lower_case": True},
                      "optimizer": {"learning_rate": 1e-3, "warmup_steps": 2},
                      "runtime": {"mixed_precision": "float32"},
                      "trainer": {"train_steps": 10, "global_batch_size": 8}}


def _finish(model_dir, metrics, steps=10, extra=None):
    """Makes `model_dir` look like a finished trainer run."""
    os.makedirs(model_dir, exist_ok=True)
    params = {"trainer": {"train_steps": steps}, **(extra or {})}
    with open(os.path.join(model_dir, "params.yaml"), "w") as f:
        yaml.safe_dump(params, f)
    with open(os.path.join(model_dir, "eval_results.json"), "w") as f:
        json.dump({"step": steps, "metrics": metrics}, f)


def _study(tmp_path):
    spec = spec_lib.load_study("pretrain_vs_random")
    study = runner.Study(spec, str(tmp_path / "study"), log=lambda message: None)
    _finish(study.pretraining_dir("mlm_nsp"), {"mlm_accuracy": 0.1, "mlm_loss": 5.0},
            extra={"model": {"encoder": ENCODER},
                   "data": {"vocab_file": "/v/vocab.txt", "lower_case": True}})
    return spec, study


def test_pretrained_arm_starts_from_the_pretraining_and_its_twin_from_its_config(tmp_path):
    spec, study = _study(tmp_path)
    stsb = spec.suite.tasks[0]
    pretrained = study.finetune_unit(spec.arms[0], stsb, 3e-5, 1)
    assert pretrained.init_checkpoint == study.pretraining_dir("mlm_nsp")
    assert "optimizer.learning_rate=3e-05" in pretrained.overrides
    assert "runtime.seed=1" in pretrained.overrides and "data.seed=1" in pretrained.overrides
    twin = study.finetune_unit(spec.arms[1], stsb, 3e-5, 1)
    assert twin.init_checkpoint is None
    encoder = [o for o in twin.overrides if o.startswith("model.encoder=")]
    assert [yaml.safe_load(o.split("=", 1)[1]) for o in encoder] == [ENCODER]
    # The study's vocabulary, not the pretraining machine's path to it ("/v/vocab.txt").
    assert runner._json_override("data.vocab_file", study.vocab_file) in twin.overrides
    assert "data.lower_case=true" in twin.overrides
    # Everything but the weights' origin is the same recipe.
    same = [o for o in twin.overrides if o not in encoder and not o.startswith("data.vocab_file")
            and not o.startswith("data.lower_case")]
    assert same == list(pretrained.overrides)
    assert "--init_checkpoint" not in twin.command()


def test_the_rate_is_chosen_on_the_first_seed_and_the_other_seeds_reuse_it(tmp_path):
    spec, study = _study(tmp_path)
    arm, stsb = spec.arms[1], spec.suite.tasks[0]
    scores = {1e-4: 0.30, 5e-5: 0.50, 3e-5: 0.50, 2e-5: 0.10}
    for lr, score in scores.items():
        _finish(study.run_dir(arm.name, "stsb", lr, 0), {"pearson": score, "spearman": 0.0})
    cell = study.run_suite_cell(arm, stsb, execute=False)
    # A tie goes to the first listed rate; the other seeds have not run yet.
    assert cell["main_metric"] == "pearson"
    assert cell["chosen_learning_rate"] == 5e-5 and not cell["complete"]
    _finish(study.run_dir(arm.name, "stsb", 5e-5, 1), {"pearson": 0.56, "spearman": 0.0})
    _finish(study.run_dir(arm.name, "stsb", 5e-5, 2), {"pearson": 0.53, "spearman": 0.0})
    cell = report.cell_statistics(study.run_suite_cell(arm, stsb, execute=False))
    assert cell["complete"] and cell["seed_scores"] == [0.50, 0.56, 0.53]
    assert abs(cell["mean"] - 0.53) < 1e-9 and abs(cell["range"] - 0.06) < 1e-9
    assert cell["learning_rate_scores"] == {"0.0001": 0.30, "5e-05": 0.50, "3e-05": 0.50,
                                            "2e-05": 0.10}


def test_percent_scores_are_stored_as_fractions_like_every_other_task(tmp_path):
    spec = spec_lib.load_study("ablations")
    study = runner.Study(spec, str(tmp_path / "a"), log=lambda message: None)
    base = next(arm for arm in spec.arms if arm.name == "base")
    squad = next(task for task in spec.suite.tasks if task.name == "squad")
    for lr, f1 in ((1e-4, 45.0), (5e-5, 52.5)):
        _finish(study.run_dir("base", "squad", lr, 0),
                {"exact_match": f1 - 10, "f1": f1, "total": 5173})
    cell = study.run_suite_cell(base, squad, execute=False)
    assert cell["chosen_learning_rate"] == 5e-5
    assert [run["metrics"] for run in cell["runs"]] == [
        {"exact_match": 0.35, "f1": 0.45, "total": 5173},
        {"exact_match": 0.425, "f1": 0.525, "total": 5173}]


def test_a_study_task_may_choose_and_report_by_another_metric(tmp_path):
    spec = spec_lib.load_study("ablations")
    study = runner.Study(spec, str(tmp_path / "a"), log=lambda message: None)
    base = next(arm for arm in spec.arms if arm.name == "base")
    mrpc = next(task for task in spec.suite.tasks if task.name == "mrpc")
    # F1 prefers 1e-4, accuracy (the paper's MRPC metric in its ablations) 5e-5.
    _finish(study.run_dir("base", "mrpc", 1e-4, 0), {"f1": 0.82, "accuracy": 0.70})
    _finish(study.run_dir("base", "mrpc", 5e-5, 0), {"f1": 0.81, "accuracy": 0.72})
    cell = study.run_suite_cell(base, mrpc, execute=False)
    assert (cell["main_metric"], cell["chosen_learning_rate"]) == ("accuracy", 5e-5)
    mrpc.main_metric = "acuracy"
    with pytest.raises(ValueError, match="task 'mrpc' of the study: its runs report "
                                         r"\['accuracy', 'f1'\], not its main_metric 'acuracy'"):
        study.run_suite_cell(base, mrpc, execute=False)


def test_a_gap_counts_only_beyond_the_spread_of_both_arms_either_way():
    spec = spec_lib.load_study("pretrain_vs_random")

    def cell(arm, task, mean, spread):
        return {"arm": arm, "task": task, "main_metric": "m", "mean": mean, "range": spread,
                "complete": True}

    rows = report.comparisons(spec, [cell("pretrained", "stsb", 0.70, 0.02),
                                     cell("random_init", "stsb", 0.60, 0.05),
                                     cell("pretrained", "conll2003", 0.53, 0.01),
                                     cell("random_init", "conll2003", 0.55, 0.01),
                                     cell("pretrained", "rte", 0.55, 0.04),
                                     cell("random_init", "rte", 0.53, 0.01),
                                     cell("pretrained", "mrpc", 0.50, 0.04),
                                     cell("random_init", "mrpc", 0.53, 0.01)])
    assert [(r["task"], r["beyond_spread"], r["direction"]) for r in rows] == [
        ("stsb", True, "better"), ("conll2003", True, "worse"), ("mrpc", False, None),
        ("rte", False, None)]
    assert [report.spread_verdict(r) for r in rows] == ["yes, better", "yes, worse", "no", "no"]


def test_a_finished_unit_is_not_run_again(tmp_path):
    model_dir = str(tmp_path / "run")
    unit = TrainUnit("u", model_dir, "no/such/config.yaml")
    assert unit.results() is None
    _finish(model_dir, {"accuracy": 0.5}, steps=7)
    # The config does not exist: running would fail, so returning proves nothing ran.
    assert unit.run(log=lambda message: None) == {"step": 7, "metrics": {"accuracy": 0.5}}


def test_tables_run_row_by_row_and_arms_only_on_their_tasks(tmp_path):
    study = runner.Study(spec_lib.load_study("ablations"), str(tmp_path / "a"),
                         log=lambda message: None)
    order = [(arm.name, task.name) for arm, task in study.units_order()]
    assert order[:8] == [("base", "mrpc"), ("base", "rte"), ("base", "sst2"), ("base", "squad"),
                         ("no_nsp", "mrpc"), ("no_nsp", "rte"), ("no_nsp", "sst2"),
                         ("no_nsp", "squad")]
    assert len(order) == len(set(order))
    assert ("l2_h128", "rte") not in order and ("base", "ner_features") in order


def test_a_task_override_may_name_a_shared_file(tmp_path, monkeypatch):
    monkeypatch.setenv("BERT_TF_DATA", "/data: here")
    spec = spec_lib.load_study("ablations")
    study = runner.Study(spec, str(tmp_path / "a"), log=lambda message: None)
    squad = next(task for task in spec.suite.tasks if task.name == "squad")
    overrides = study.task_overrides(squad)
    assert 'data.train_file="/data: here/squad/dev-v1.1.json"' in overrides
    assert "data.train_articles=even" in overrides and "data.eval_articles=odd" in overrides


def test_a_table_of_metrics_averages_each_metric_over_the_chosen_rates_seeds():
    spec = spec_lib.load_study("feature_based")

    def run(lr, seed, dev, test):
        return {"learning_rate": lr, "seed": seed, "metrics": {"eng.testa/f1": dev,
                                                               "eng.testb/f1": test}}

    cells = [{"arm": "minilm", "task": "last", "main_metric": "eng.testa/f1",
              "chosen_learning_rate": 1e-3, "complete": False,
              "runs": [run(1e-3, 0, 0.90, 0.80), run(1e-3, 1, 0.92, 0.84)]}]
    table = report.table_results(spec.tables[0], spec, [], cells)
    rows = {row["task"]: row for row in table["rows"]}
    dev, test = rows["last"]["values"]["eng.testa/f1"], rows["last"]["values"]["eng.testb/f1"]
    assert abs(dev["mean"] - 0.91) < 1e-9 and abs(test["mean"] - 0.82) < 1e-9
    assert dev["seeds"] == 2 and not dev["complete"]
    assert rows["embeddings"]["values"]["eng.testa/f1"] is None  # not run yet
    assert rows["last"]["paper"] == [94.9, None]
    markdown = "\n".join(report._tables_markdown([table]))
    assert "| Last hidden | 91.00 ± 1.41 (n=2), incomplete | 82.00 ± 2.83 (n=2), incomplete " \
           "| 94.9 |  |" in markdown
    assert "| Embeddings | pending | pending | 91.0 |  |" in markdown


def test_training_time_comes_from_each_loops_logged_rate():
    # Two loops of 50 steps at 2 and 5 steps/s; a killed process records no wall time.
    curves = {"steps_per_second": [(50, 2.0), (100, 5.0)],
              "examples_per_second": [(50, 64.0), (100, 160.0)]}
    assert report.training_loop_seconds(curves, batch_size=32) == 35.0
    # Runs from before steps_per_second: examples/s over the batch.
    del curves["steps_per_second"]
    assert report.training_loop_seconds(curves, batch_size=32) == 35.0


def test_a_bad_task_override_fails_before_anything_runs(tmp_path):
    spec = spec_lib.load_study("ablations")
    spec.suite.tasks[-1].overrides.append("model.feature_mixx=last")
    study = runner.Study(spec, str(tmp_path / "a"), log=lambda message: None)
    with pytest.raises(config_lib.ConfigError, match="model.feature_mixx"):
        study.run()
    assert not (tmp_path / "a").exists()  # no corpus, no pretraining


def test_a_metric_no_run_reports_is_pending_in_its_table():
    # A table column naming a metric the runs lack (a typo in the study YAML)
    # shows as pending rather than crashing the report hours into a study.
    spec = spec_lib.load_study("feature_based")
    cells = [{"arm": "minilm", "task": "last", "main_metric": "eng.testa/f1",
              "chosen_learning_rate": 1e-3, "complete": True,
              "runs": [{"learning_rate": 1e-3, "seed": 0, "metrics": {"eng.testa/f1": 0.9}}]}]
    table = report.table_results(spec.tables[0], spec, [], cells)
    (row,) = [row for row in table["rows"] if row["task"] == "last"]
    assert row["values"]["eng.testa/f1"]["mean"] == 0.9
    assert row["values"]["eng.testb/f1"] is None


def _all_finished_but_the_first(study):
    """Finishes every packing_parity (ci) unit but the first; returns (that unit, its task)."""
    (arm,) = study.spec.reference_arms
    first, *others = study.spec.suite.tasks
    for task in others:
        _finish(study.finetune_unit(arm, task, 5e-5, 0).model_dir, {study.main_metric(task): 0.8})
    held = study.finetune_unit(arm, first, 5e-5, 0)
    os.makedirs(held.model_dir)
    return held, first


def test_a_unit_held_by_another_process_is_passed_over_then_waited_for(tmp_path, monkeypatch):
    spec = spec_lib.load_study("packing_parity", "ci")
    waiting = threading.Event()
    wait_messages = []

    def log(message):
        if "waiting for units running in another process" in message:
            wait_messages.append(message)
            waiting.set()

    study = runner.Study(spec, str(tmp_path / "pp"), "ci", log=log)
    held, first = _all_finished_but_the_first(study)
    # Every unit is finished or held: training anything would be the bug under test.
    monkeypatch.setattr(TrainUnit, "_train", lambda *args: pytest.fail("trained a held unit"))
    holding = threading.Event()

    def other_process():
        # A second open file holds the flock exactly as another process would.
        with lock_file(os.path.join(held.model_dir, LOCK_FILE), wait=False) as lock:
            assert lock is not None
            holding.set()
            waiting.wait(timeout=30)
            time.sleep(0.3)  # several polls pass while the unit is still held
            _finish(held.model_dir, {study.main_metric(first): 0.9})

    thread = threading.Thread(target=other_process)
    thread.start()
    holding.wait(timeout=30)
    assert held.run(log=log) is None
    results = study.run(poll_seconds=0.05)
    thread.join()
    assert len(wait_messages) == 1, "the wait is logged once, not at every poll"
    assert all(cell["complete"] for cell in results["finetuning"])
    assert results["finetuning"][0]["runs"][0]["metrics"] == {study.main_metric(first): 0.9}


def test_a_killed_holder_leaves_no_stale_lock(tmp_path):
    path = str(tmp_path / LOCK_FILE)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, sys, time; f = open(sys.argv[1], 'a'); "
         "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(120)", path],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with lock_file(path, wait=False) as lock:
            assert lock is None
    finally:
        holder.kill()
        holder.wait()
    with lock_file(path, wait=False) as lock:
        assert lock is not None


def test_a_process_may_train_only_some_arms(tmp_path, monkeypatch, shared_file, minilm_dir):
    shared_file("vocab", "bert-base-uncased-vocab.txt")
    spec = spec_lib.load_study("pretrain_vs_random")
    with pytest.raises(ValueError, match="unknown arm.s. 'minlm' of study 'pretrain_vs_random'; "
                                         "its arms: pretrained, random_init, minilm"):
        runner.Study(spec, str(tmp_path / "s"), arms=["minlm"])
    with pytest.raises(ValueError, match="must not contain one another"):
        runner.Study(spec, str(tmp_path / "s"), records_dir=str(tmp_path / "s" / "records"))
    kept = tmp_path / "records"
    study = runner.Study(spec, str(tmp_path / "s"), log=lambda message: None, arms=["minilm"],
                         records_dir=str(kept))
    for task in spec.suite.tasks:
        for learning_rate in spec.suite.learning_rates:
            _finish(study.run_dir("minilm", task.name, learning_rate, 0),
                    {study.main_metric(task): 0.8 + learning_rate})
        for seed in spec.suite.seeds[1:]:
            _finish(study.run_dir("minilm", task.name, 1e-4, seed),
                    {study.main_metric(task): 0.8})
    # One finished run is only in the records (another machine's): run() restores it.
    restored = os.path.relpath(study.run_dir("minilm", "sst2", 1e-4, 2), study.out_dir)
    os.renames(os.path.join(study.out_dir, restored), os.path.join(kept, restored))
    # Every MiniLM run is finished: training anything (the pretraining) or waiting for
    # other processes is the bug under test.
    monkeypatch.setattr(TrainUnit, "_train", lambda *args: pytest.fail("trained a unit"))
    monkeypatch.setattr(runner.time, "sleep", lambda seconds: pytest.fail("waited"))
    results = study.run()
    complete = {(cell["arm"], cell["complete"]) for cell in results["finetuning"]}
    assert complete == {("minilm", True), ("pretrained", False), ("random_init", False)}
    assert not os.path.exists(os.path.join(study.pretraining_dir("mlm_nsp"), "params.yaml"))
    # ...and saves the records: the report and every finished run.
    # The records' copy names no folder of this machine (`portable_paths`).
    assert (kept / "report.md").read_text() == portable_paths.portable(
        (tmp_path / "s" / "report.md").read_text(), study.out_dir)
    assert len(list(kept.rglob("eval_results.json"))) == 30


def test_a_process_waits_for_its_own_arms_units_held_elsewhere(tmp_path, monkeypatch):
    spec = spec_lib.load_study("packing_parity", "ci")
    study = runner.Study(spec, str(tmp_path / "pp"), "ci", log=lambda message: None,
                         arms=[spec.reference_arms[0].name])
    held, _ = _all_finished_but_the_first(study)

    class Waited(Exception):
        pass

    def sleep(seconds):
        raise Waited

    monkeypatch.setattr(runner.time, "sleep", sleep)
    with lock_file(os.path.join(held.model_dir, LOCK_FILE), wait=False) as lock:
        assert lock is not None
        # One of this process's units is held elsewhere: it must wait, not report done.
        with pytest.raises(Waited):
            study.run()


def test_reading_other_arms_needs_no_minilm(tmp_path, monkeypatch):
    spec = spec_lib.load_study("packing_parity", "ci")
    study = runner.Study(spec, str(tmp_path / "pp"), "ci", log=lambda message: None)
    (arm,) = spec.reference_arms
    for task in spec.suite.tasks:
        _finish(study.run_dir(arm.name, task.name, 5e-5, 0), {study.main_metric(task): 0.8})
    monkeypatch.setattr(runner.shared_data, "minilm_checkpoint_dir", lambda: None)
    results = study.run(execute=False)
    assert all(cell["complete"] for cell in results["finetuning"])


def test_each_finished_run_is_recorded_before_the_next_one_starts(tmp_path, monkeypatch):
    # A cell is six runs, hours on a slow machine: its finished runs must not wait for it.
    spec, study = _study(tmp_path)
    study.records_dir = str(tmp_path / "records")
    twin, stsb = spec.arms[1], spec.suite.tasks[0]
    recorded_before = []

    def train(unit, lock, log):
        finetune_records = os.path.join(study.records_dir, "finetune")
        recorded_before.append(sum("eval_results.json" in files
                                   for _, _, files in os.walk(finetune_records)))
        _finish(unit.model_dir, {"pearson": 0.5, "spearman": 0.0})
        return unit.results()

    monkeypatch.setattr(TrainUnit, "_train", train)
    assert study.run_suite_cell(twin, stsb)["complete"]
    assert recorded_before == [0, 1, 2, 3, 4, 5]


def test_a_running_pretraining_has_no_final_evaluation_for_the_tables(tmp_path):
    model_dir = str(tmp_path / "pretraining")
    _finish(model_dir, {"mlm_accuracy": 0.1, "mlm_loss": 5.0}, steps=10, extra=PRETRAINING_PARAMS)
    # Evaluated at step 5 of 10: eval_results.json exists, the run is not finished.
    with open(os.path.join(model_dir, "eval_results.json"), "w") as f:
        json.dump({"step": 5, "metrics": {"mlm_accuracy": 0.1, "mlm_loss": 5.0}}, f)
    running = report.pretraining_summary("p", model_dir)
    assert "final_eval" not in running and running["latest_eval_step"] == 5

    _finish(model_dir, {"mlm_accuracy": 0.2, "mlm_loss": 4.0}, steps=10, extra=PRETRAINING_PARAMS)
    finished = report.pretraining_summary("p", model_dir)
    assert finished["final_eval"]["step"] == 10
    assert finished["final_eval"]["metrics"]["mlm_accuracy"] == 0.2


def test_a_unit_reads_its_finished_local_run_without_importing_tensorflow(tmp_path):
    model_dir = str(tmp_path / "unit")
    _finish(model_dir, {"accuracy": 0.75}, steps=10)
    code = ("import json, sys\n"
            "from research.studies.units import TrainUnit\n"
            "print(json.dumps(TrainUnit('u', sys.argv[1], 'config.yaml').results()))\n"
            "print('tensorflow' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", code, model_dir], capture_output=True,
                            text=True, timeout=60, cwd=portable_paths.REPO_ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    results, imported = result.stdout.strip().splitlines()
    assert json.loads(results) == {"step": 10, "metrics": {"accuracy": 0.75}}
    assert imported == "False"

def test_the_report_shows_what_other_processes_finished_during_the_pass(
        tmp_path, monkeypatch, shared_file, minilm_dir):
    # Two processes, one study: the other trains `pretrained` while this one trains
    # MiniLM, and the other's runs finish after this pass has gone by that arm's cells.
    shared_file("vocab", "bert-base-uncased-vocab.txt")
    spec = spec_lib.load_study("pretrain_vs_random")
    study = runner.Study(spec, str(tmp_path / "study"), log=lambda message: None,
                         arms=["minilm"])
    _finish(study.pretraining_dir("mlm_nsp"), {"mlm_accuracy": 0.1, "mlm_loss": 5.0},
            extra=PRETRAINING_PARAMS)
    other = next(arm for arm in spec.arms if arm.kind == "pretrained")
    first_task, second_task = spec.suite.tasks[:2]
    best_rate = max(spec.suite.learning_rates)
    reports = []

    def finish_first_cell_elsewhere():
        for learning_rate in spec.suite.learning_rates:
            _finish(study.run_dir(other.name, first_task.name, learning_rate, 0),
                    {study.main_metric(first_task): 0.7 + learning_rate})
        for seed in spec.suite.seeds[1:]:
            _finish(study.run_dir(other.name, first_task.name, best_rate, seed),
                    {study.main_metric(first_task): 0.7})

    def train(unit, lock, log):
        results_file = os.path.join(study.out_dir, "results.json")
        if os.path.exists(results_file):
            with open(results_file) as f:
                reports.append(json.load(f))
        elif not os.path.exists(study.run_dir(other.name, first_task.name, best_rate, 0)):
            finish_first_cell_elsewhere()  # while this process trains its first run
        _finish(unit.model_dir, {study.main_metric(task): 0.8 for task in spec.suite.tasks})
        return unit.results()

    monkeypatch.setattr(TrainUnit, "_train", train)
    counts = {"documents": 1, "words": 10}
    manifest = {"holdout_every": 10, "sources": {"wiki": {"train": counts, "heldout": counts}}}
    monkeypatch.setattr(runner.Study, "build_corpus", lambda self: runner.corpus_lib.CorpusFiles(
        ["t.txt"], ["h.txt"], manifest))
    results = study.run()

    def cell(results, task):
        return next(c for c in results["finetuning"]
                    if (c["arm"], c["task"]) == (other.name, task.name))

    # Every report written after this process's first cell holds the other's cell...
    assert len(reports) == 6 * (len(spec.suite.tasks) - 1)
    assert all(cell(r, first_task)["complete"] for r in reports)
    # ...and so does the final one, with the rate the other process's runs chose.
    assert cell(results, first_task)["chosen_learning_rate"] == best_rate
    assert not cell(results, second_task)["runs"]


def test_seeds_that_score_alike_are_plotted(tmp_path):
    # A model that always predicts one class scores the same on every seed; the mean
    # then lies a rounding error outside the seeds' range.
    spec = spec_lib.load_study("pretrain_vs_random")
    task = spec.suite.tasks[0]
    runs = [{"learning_rate": 1e-4, "seed": seed, "model_dir": str(tmp_path / f"s{seed}"),
             "metrics": {"pearson": 0.8}} for seed in spec.suite.seeds]
    cell = report.cell_statistics({"arm": spec.arms[0].name, "task": task.name,
                                   "main_metric": "pearson", "chosen_learning_rate": 1e-4,
                                   "complete": True, "runs": runs})
    assert 100 * cell["mean"] != min(100 * s for s in cell["seed_scores"])
    path = tmp_path / "dev_scores.png"
    report.plot_scores(spec, [cell], str(path))
    assert path.stat().st_size > 0


def test_the_selection_table_tells_a_rate_not_run_yet_from_one_never_run(tmp_path):
    # ablations: MRPC tries 1e-4 and 5e-5, feature-based NER only 1e-3.
    spec = spec_lib.load_study("ablations")
    study = types.SimpleNamespace(spec=spec, profile="full")
    runs = [{"learning_rate": 1e-4, "seed": 0, "model_dir": str(tmp_path / "run"),
             "metrics": {"accuracy": 0.7}}]
    cell = report.cell_statistics({"arm": "base", "task": "mrpc", "main_metric": "accuracy",
                                   "chosen_learning_rate": None, "complete": False,
                                   "runs": runs})
    markdown = report._markdown(study, None, [], [cell], [], [])
    assert "| mrpc | base | 70.00 | pending | - |" in markdown
