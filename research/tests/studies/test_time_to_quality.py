"""The pre-registered second round of the time-to-train benchmark (time_to_quality.yaml):
its arms, replicates, budgets, fixed fine-tuning rates and verdict, and its CI profile."""

import datetime
import json
import os
import subprocess
import sys

import pytest

from bert_tf import config as config_lib
from research.studies import spec as study_spec
from research.studies.corpus import CorpusFiles
from research.studies.time_to_train import quality, report, run_units, runner
from research.studies.time_to_train import spec as spec_lib


def test_the_round_names_its_arms_replicates_rates_and_rule():
    spec = spec_lib.load("time_to_quality")
    groups = {}
    for recipe in spec.recipes:
        groups.setdefault(recipe.group, []).append(recipe.name)
    assert groups == {
        "baseline": ["baseline_seed0", "baseline_seed1", "baseline_seed2"],
        **{name: [f"{name}_seed0", f"{name}_seed1"]
           for name in ("control", "mask_schedule", "no_dropout", "no_curriculum", "mask_30")}}
    assert spec.target.from_reference and all(r.train_to_budget for r in spec.recipes)
    assert all(r.wall_fraction == 0.5 for r in spec.recipes if r.group != "baseline")
    assert {(r.task, r.learning_rate) for r in spec.quality.learning_rates} == {
        ("stsb", 2e-4), ("mrpc", 1e-4), ("rte", 1e-4)}
    assert spec.quality.seeds == [0, 1, 2, 3, 4]
    assert spec.quality.verdict == spec_lib.VerdictSpec(margin=1.0, confidence=0.90,
                                                        resamples=10000, seed=0)
    # A replicate's seeds set both the initial weights and the data order.
    assert spec.recipe("control_seed1").phases[1].overrides[-2:] == ["runtime.seed=1",
                                                                     "data.seed=1"]


@pytest.mark.parametrize("patch, message", [
    ({"recipes": [{"name": "baseline", "seeds": [0], "phases": [{"config": "x.yaml"}]}]},
     "target.from_reference needs the reference recipe 'baseline' trained to its budget"),
    ({"recipes": [{"name": "baseline", "seeds": [0], "train_to_budget": True,
                   "phases": [{"config": "x.yaml"}]},
                  {"name": "fast", "wall_fraction": 0.5, "train_to_budget": True,
                   "phases": [{"config": "x.yaml"}]}]},
     "recipe 'fast': wall_fraction (0.5) must be in (0, 1], on a recipe other than the "
     "reference, with train_to_budget: true and exactly one phase with fill_budget (got [])"),
    ({"recipes": [{"name": "baseline", "train_to_budget": True,
                   "phases": [{"config": "x.yaml", "fill_budget": True}]}]},
     "phases ['main'] have fill_budget but the recipe has no wall_fraction"),
    ({"quality": {"learning_rates": [{"task": "cola", "learning_rate": 1e-4}]}},
     "quality.learning_rates must give distinct tasks of quality.tasks"),
    ({"quality": {"seeds": [0, 0]}}, "quality.seeds must be distinct"),
    ({"quality": {"verdict": {"confidence": 1.5}}}, "quality.verdict needs margin >= 0"),
])
def test_inconsistent_rounds_are_errors(tmp_path, patch, message):
    values = config_lib.load_yaml(study_spec.study_path("time_to_quality"))
    for key, value in patch.items():
        values[key] = ({**values[key], **value} if isinstance(value, dict) else value)
    if "recipes" in patch:
        values["quality"]["recipes"] = []
    path = tmp_path / "bad.yaml"
    path.write_text(json.dumps(values))
    with pytest.raises(config_lib.ConfigError) as raised:
        spec_lib.load(str(path))
    assert message in str(raised.value)


@pytest.fixture
def benchmark(tmp_path, shared_file):
    shared_file("vocab", "bert-base-uncased-vocab.txt")
    benchmark = runner.Benchmark(spec_lib.load("time_to_quality"), str(tmp_path), log=print)
    # No corpus is read to resolve the configs: stand-in paths.
    benchmark._corpus = CorpusFiles([str(tmp_path / "train.txt")],
                                    [str(tmp_path / "heldout.txt")], {})
    return benchmark


@pytest.mark.long  # a few seconds: every arm's config resolved
def test_every_arm_resolves_and_is_measured_on_the_first_rounds_batches(benchmark):
    benchmark.check_same_measurement()  # data seeds differ, the held-out seed does not
    spec = benchmark.spec
    for recipe in spec.recipes:
        seed = int(recipe.name.rsplit("_seed", 1)[1])
        for phase in recipe.phases:
            experiment = benchmark.experiment(recipe, phase)
            assert (experiment.runtime.seed, experiment.data.seed) == (seed, seed)
            assert experiment.data.eval_seed == 1 and experiment.data.eval_masked_lm_prob == 0.15
    schedule = benchmark.experiment(spec.recipe("mask_schedule_seed0"),
                                    spec.recipe("mask_schedule_seed0").phases[0]).data
    assert (schedule.masked_lm_prob, schedule.masked_lm_prob_end,
            schedule.max_predictions_per_seq) == (0.30, 0.15, 20)
    assert benchmark.step_shape(spec.recipe("mask_30_seed0"),
                                spec.recipe("mask_30_seed0").phases[1]).prediction_slots == 41
    no_dropout = benchmark.experiment(spec.recipe("no_dropout_seed0"),
                                      spec.recipe("no_dropout_seed0").phases[1])
    assert no_dropout.model.encoder.hidden_dropout == 0.0
    assert benchmark.step_shape(spec.recipe("no_curriculum_seed0"),
                                spec.recipe("no_curriculum_seed0").phases[0]).seq_length == 128


@pytest.mark.long  # a few seconds: configs resolved
def test_a_budget_is_what_half_the_references_time_buys_and_stays_fixed(benchmark,
                                                                        monkeypatch):
    spec = benchmark.spec
    control = spec.recipe("control_seed1")
    with pytest.raises(ValueError, match="train every run of 'baseline' and time every"):
        benchmark.fill_budget_steps(control)
    timing = {"started_utc": "2026-12-01T00:00:00Z", "phases": {
        "control_seed0/seq64": {"seconds_per_step": 0.6},
        "control_seed0/seq128": {"seconds_per_step": 1.2}}}
    timing_file = os.path.join(benchmark.out_dir, "timing.json")
    with open(timing_file, "w", encoding="utf-8") as f:
        json.dump(timing, f)
    monkeypatch.setattr(report, "reference_mean", lambda *_: {"seconds_to_target": 3600.0})
    # 1,800 s, less 200 steps x 1.2 s at length 128, buys 2,600 steps at 0.6 s.
    assert benchmark.fill_budget_steps(control) == 2600
    seq64 = benchmark.experiment(control, control.phases[0])
    assert seq64.trainer.train_steps == seq64.optimizer.decay_steps == 2600
    # Fixed for both replicates, whatever a later timing run measures.
    timing["phases"]["control_seed0/seq64"]["seconds_per_step"] = 0.3
    with open(timing_file, "w", encoding="utf-8") as f:
        json.dump(timing, f)
    assert benchmark.fill_budget_steps(spec.recipe("control_seed0")) == 2600
    with open(os.path.join(benchmark.out_dir, runner.BUDGETS_FILE), encoding="utf-8") as f:
        assert json.load(f)["control"]["steps"] == 2600


def test_replicates_are_fine_tuned_run_by_run_and_the_verdict_pools_them():
    rows = []
    for name, scores in (("baseline_seed0", [0.53, 0.52]), ("baseline_seed1", [0.54, 0.53]),
                         ("fast_seed0", [0.49, 0.50]), ("fast_seed1", [0.50, 0.49])):
        rows.append({"recipe": name, "task": "stsb", "grid": quality.STUDY_GRID,
                     "complete": True, "scores": scores})
    results = {"recipes": [{"name": row["recipe"], "group": row["recipe"].split("_seed")[0]}
                           for row in rows],
               "quality": rows, "reference_group": "baseline"}
    verdict = report.pooled_verdict(results, ["stsb"], spec_lib.VerdictSpec(resamples=500))
    (candidate,) = verdict["candidates"]
    assert candidate["recipe"] == "fast" and candidate["runs"] == {"stsb": 2}
    (difference,) = candidate["differences"]
    assert difference["difference"] == pytest.approx(-3.5)
    assert candidate["keeps_quality"] is False
    assert "| fast | -3.50 [" in "\n".join(report.verdict_markdown({"verdict": verdict}))


def test_units_run_the_references_runs_first_and_fine_tune_the_compared_arms():
    spec = spec_lib.load("time_to_quality")
    rows = [row.name for row in run_units.unit_rows(spec)]
    assert rows[:3] == ["baseline_seed0", "baseline_seed1", "baseline_seed2"]
    assert len(rows) == len(spec.recipes) == 13
    assert [row.name for row in run_units.unit_rows(spec, ["control", "baseline_seed1"])] == \
        ["baseline_seed1", "control_seed0", "control_seed1"]
    assert all(run_units.is_finetuned(spec, row) for row in spec.recipes)
    with pytest.raises(ValueError, match="unknown recipe"):
        run_units.unit_rows(spec, ["nope"])


def test_a_deadline_is_the_next_such_utc_time():
    now = datetime.datetime(2026, 12, 7, 21, 30, tzinfo=datetime.timezone.utc)
    assert run_units.parse_deadline("23:55", now) == now.replace(hour=23, minute=55)
    assert run_units.parse_deadline("00:10", now) == datetime.datetime(
        2026, 12, 8, 0, 10, tzinfo=datetime.timezone.utc)


def test_a_candidates_unit_waits_for_the_references_units_then_for_the_timing_run(
        benchmark, tmp_path, monkeypatch):
    records = str(tmp_path / "records")
    control = benchmark.spec.recipe("control_seed0")
    with pytest.raises(run_units.UnitWaitsError,
                       match="waits for the reference's units baseline_seed0, baseline_seed1, "
                             "baseline_seed2"):
        run_units._check_ready(benchmark, records, control)
    done = {"baseline_seed0", "baseline_seed2"}
    monkeypatch.setattr(run_units, "unit_complete", lambda _, __, row: row.name in done)
    with pytest.raises(run_units.UnitWaitsError, match="units baseline_seed1: run them first"):
        run_units._check_ready(benchmark, records, control)
    done.add("baseline_seed1")
    with pytest.raises(run_units.UnitWaitsError, match="needs the timing run first: python -m "
                       "research.study time_to_quality .* --timing_only"):
        run_units._check_ready(benchmark, records, control)
    # The reference's own units need nothing.
    run_units._check_ready(benchmark, records, benchmark.spec.recipe("baseline_seed1"))


def test_units_stop_before_one_that_would_end_after_the_deadline_or_past_max_units(
        benchmark, tmp_path, monkeypatch):
    records = str(tmp_path / "records")
    monkeypatch.setattr(run_units, "unit_complete", lambda _, __, row: row.name == "baseline_seed0")
    monkeypatch.setattr(run_units, "estimated_seconds", lambda *_: 3600.0)
    monkeypatch.setattr(run_units, "save", lambda *_: {})
    monkeypatch.setattr(benchmark, "check_same_measurement", lambda: None)
    started, lines = [], []
    monkeypatch.setattr(run_units, "run_unit", lambda _, __, row: started.append(row.name))
    monkeypatch.setattr(benchmark, "log", lines.append)
    now = datetime.datetime.now(datetime.timezone.utc)
    run_units.run(benchmark, records, deadline=now + datetime.timedelta(minutes=50))
    assert started == [] and lines[-2].startswith("next unit: baseline_seed1, not started: "
                                                  "it takes about 1.00 h")
    assert lines[-1] == "units complete in the records: 1/13; next: baseline_seed1"
    run_units.run(benchmark, records, ["baseline"], max_units=1)
    assert started == ["baseline_seed1"]
    run_units.run(benchmark, records, ["baseline"], deadline=now + datetime.timedelta(hours=3))
    assert started == ["baseline_seed1", "baseline_seed1", "baseline_seed2"]


def _run(out, *extra, check=True):
    command = [sys.executable, "-m", "research.study", "time_to_quality", "--out", str(out),
               "--profile", "ci", *extra]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
    result = subprocess.run(command, cwd=study_spec.REPO_ROOT, env=env, capture_output=True,
                            text=True, timeout=1200)
    if check:
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def _trained(output: str) -> list[str]:
    """The units a run of the benchmark trained, in order (its '== <unit>: running' lines)."""
    return [line.split("== ", 1)[1].split(":", 1)[0] for line in output.splitlines()
            if ": running (log:" in line]


@pytest.mark.long
def test_ci_profile_runs_the_round_unit_by_unit_across_machines(tmp_path, shared_file):
    """Each session starts on an empty output directory, as on a new machine: only the
    records carry the round over."""
    shared_file("vocab", "bert-base-uncased-vocab.txt")
    shared_file("glue", "STS-B", "train.tsv")
    records = tmp_path / "records"
    units = ("--units", "--records", str(records))
    # Session 1: each reference run is pretrained and fine-tuned at once, before the next
    # run; the candidate then waits for the timing run, saying how to run it.
    first = _run(tmp_path / "session1", *units, check=False)
    assert first.returncode == 1, first.stdout[-3000:] + first.stderr[-3000:]
    (error,) = [line for line in first.stderr.splitlines() if line.startswith("error:")]
    assert "unit mask_schedule_seed0 needs the timing run first" in error
    assert "--timing_only" in error
    assert _trained(first.stdout) == ["baseline_seed0/main", "baseline_seed0/stsb/lr0.0001_seed0",
                                      "baseline_seed1/main", "baseline_seed1/stsb/lr0.0001_seed0"]
    finals = [json.loads((records / "runs" / f"baseline_seed{seed}" / "main" /
                          "eval_results.json").read_text())["metrics"] for seed in (0, 1)]
    # Other initial weights and data order, the same held-out batches.
    assert finals[0]["mlm_loss"] != finals[1]["mlm_loss"]
    results = json.loads((records / "results.json").read_text())
    assert results["target"]["value"] == pytest.approx(
        sum(final["mlm_accuracy"] for final in finals) / 2)
    assert results["reference_mean"]["steps_to_target"] == 8
    assert not list(records.rglob("ckpt-*")) and not list(records.rglob("corpus"))
    # Session 2: the timing run keeps the reference's units in the report; the candidate's
    # unit runs on its budget, its share (ci: all) of the reference's mean wall time to
    # the target, fixed once; nothing of the reference is trained again.
    second = tmp_path / "session2"
    _run(second, "--timing_only", "--records", str(records))
    assert json.loads((records / "results.json").read_text())["reference_mean"] is not None
    timed = json.loads((records / "timing.json").read_text())["phases"]
    assert set(timed) == {"baseline_seed0/main", "mask_schedule_seed0/main"}
    assert _trained(_run(second, *units).stdout) == ["mask_schedule_seed0/main",
                                                      "mask_schedule_seed0/stsb/lr0.0001_seed0"]
    budgets = json.loads((records / "budgets.json").read_text())
    steps = budgets["mask_schedule"]["steps"]
    reference = json.loads((records / "results.json").read_text())["reference_mean"]
    per_step = timed["mask_schedule_seed0/main"]["seconds_per_step"]
    assert steps == int(1.0 * reference["seconds_to_target"] / per_step) >= 1
    params = config_lib.load_yaml(str(records / "runs" / "mask_schedule_seed0" / "main" /
                                      "params.yaml"))
    assert params["trainer"]["train_steps"] == params["optimizer"]["decay_steps"] == steps
    assert (params["data"]["masked_lm_prob"], params["data"]["masked_lm_prob_end"]) == \
        (0.30, 0.15)
    # Every run of every arm fine-tuned at the fixed rate on the profile's seed; the verdict.
    for arm in ("baseline_seed0", "baseline_seed1", "mask_schedule_seed0"):
        assert sorted(p.name for p in (records / "quality" / "finetune" / arm / "stsb")
                      .iterdir()) == ["lr0.0001_seed0"]
    results = json.loads((records / "results.json").read_text())
    (candidate,) = results["verdict"]["candidates"]
    assert candidate["recipe"] == "mask_schedule" and candidate["keeps_quality"] is not None
    assert results["verdict"]["reference_runs"] == {"stsb": 2}
    assert "## Pre-registered verdict" in (records / "report.md").read_text()
    # Session 3: every unit is complete in the records, so nothing trains and the report
    # they rebuild gives the same verdict.
    assert _trained(_run(tmp_path / "session3", *units).stdout) == []
    assert json.loads((records / "results.json").read_text())["verdict"] == results["verdict"]
