"""The time-to-train benchmark: its spec, its FLOPs count and its CI profile end to end."""

import json
import os
import subprocess
import sys

import pytest

from bert_tf import config as config_lib
from research.studies import spec as study_spec
from research.studies.corpus import CorpusFiles
from research.studies.time_to_train import flops, quality, runner
from research.studies.time_to_train import spec as spec_lib


def test_the_benchmark_and_its_ci_profile_load():
    full = spec_lib.load("time_to_train")
    assert full.recipes[0].name == full.reference_recipe == "baseline"
    assert [p.name for p in full.recipe("seq64_then_128").phases] == ["seq64", "seq128"]
    # The default target is the pretraining study's committed final accuracy.
    assert spec_lib.target_value(full) == pytest.approx(0.16466903320108583)
    ci = spec_lib.load("time_to_train", "ci")
    assert ci.target.value == 1.0 and len(ci.recipes) == 2
    assert spec_lib.is_time_to_train("time_to_train")
    assert not spec_lib.is_time_to_train("pretrain_vs_random")


@pytest.mark.parametrize("patch, message", [
    ({"reference_recipe": "nope"}, "reference_recipe 'nope' is not a recipe"),
    ({"reference_recipe": "a", "recipes": [{"name": "a", "phases": []}]},
     "recipe 'a': phases need distinct names"),
    ({"target": {"metric": "mlm_accuracy"}}, "target needs a value or from_record"),
    ({"timing": {"steps": 10, "steps_per_loop": 10}}, "timing.steps (10) must exceed"),
    ({"quality": {"recipes": ["fast"]}}, "quality.recipes ['fast'] are not recipes"),
    ({"quality": {"tasks": []}}, "quality.tasks is empty"),
    ({"quality": {"goal_wall_fraction": 0}}, "quality.goal_wall_fraction must be in (0, 1]"),
    ({"quality": {"reference_steps": [600, 630]}},
     "quality.reference_steps [630] are not positive multiples of the reference recipe's "
     "eval_every (50)"),
    ({"quality": {"reference_steps": [600], "reference_steps_tasks": ["cola"]}},
     "quality.reference_steps_tasks ['cola'] are not in quality.tasks"),
    ({"quality": {"extended_grids": [{"task": "cola", "learning_rates": [3e-4]}]}},
     "quality.extended_grids task 'cola' is not in quality.tasks"),
    ({"quality": {"extended_grids": [{"task": "stsb", "learning_rates": []}]}},
     "quality.extended_grids 'stsb': learning_rates must be positive and not empty"),
    ({"quality": {"extended_grids": [{"task": "stsb", "learning_rates": [3e-4],
                                      "every_seed_for": ["nope"], "every_seed_rates": [3e-4]}]}},
     "quality.extended_grids 'stsb': every_seed_for ['nope'] are not recipes"),
    ({"quality": {"extended_grids": [{"task": "stsb", "learning_rates": [3e-4],
                                      "every_seed_for": ["baseline"]}]}},
     "every_seed_for and every_seed_rates go together"),
    ({"quality": {"extended_grids": [{"task": "stsb", "learning_rates": [3e-4],
                                      "recipes": ["baseline"], "every_seed_for": ["mlm_only"],
                                      "every_seed_rates": [3e-4]}]}},
     "every_seed_for ['mlm_only'] are not in its recipes ['baseline']"),
])
def test_inconsistent_specs_are_errors(tmp_path, patch, message):
    values = config_lib.load_yaml(study_spec.study_path("time_to_train"))
    values.update(patch)
    path = tmp_path / "bad.yaml"
    path.write_text(json.dumps(values))
    with pytest.raises(config_lib.ConfigError) as raised:
        spec_lib.load(str(path))
    assert message in str(raised.value)


def _recipe(name, status, seconds=None, flops_to_target=None):
    return {"name": name, "status": status, "seconds_to_target": seconds,
            "flops_to_target": flops_to_target}


def test_the_fastest_recipe_is_by_wall_time_when_all_are_timed_else_by_flops():
    timed = {"recipes": [_recipe("baseline", "reached", 100.0, 9.0),
                         _recipe("small_steps", "reached", 40.0, 5.0),
                         _recipe("few_flops", "reached", 60.0, 2.0),
                         _recipe("unfinished", "running")]}
    assert quality.fastest_reached(timed) == "small_steps"
    timed["recipes"][1]["seconds_to_target"] = None
    assert quality.fastest_reached(timed) == "few_flops"
    assert quality.fastest_reached({"recipes": [_recipe("baseline", "budget")]}) is None


def test_the_reference_is_read_between_its_evaluations_at_the_same_flops():
    from research.studies.time_to_train import report

    curve = [{"flops": 10.0, "value": 0.10}, {"flops": 20.0, "value": 0.20}]
    assert report.reference_value_at(curve, 15.0) == pytest.approx(0.15)
    assert report.reference_value_at(curve, 20.0) == pytest.approx(0.20)
    assert report.reference_value_at(curve, 25.0) is None


def _cell(recipe, scores, chosen=2e-5, complete=True, task="stsb", metric="pearson",
          grid=quality.STUDY_GRID, every_seed=()):
    runs = [{"learning_rate": chosen, "seed": seed, "metrics": {metric: score}}
            for seed, score in enumerate(scores)]
    # A rate the selection passed over does not count.
    runs.append({"learning_rate": 1e-4, "seed": 0, "metrics": {metric: 0.99}})
    return {"arm": recipe, "task": task, "main_metric": metric,
            "chosen_learning_rate": chosen if complete else None, "complete": complete,
            "runs": runs, "grid": grid,
            "every_seed": [{"learning_rate": rate, "seed": seed, "metrics": {metric: score}}
                           for rate, seed, score in every_seed]}


def test_quality_rows_compare_each_mean_with_the_reference_spread():
    rows = quality.summarize([_cell("baseline", [0.50, 0.52, 0.54]),
                              _cell("fast", [0.51, 0.51, 0.51]),
                              _cell("faster", [0.47, 0.48, 0.49]),
                              _cell("pending", [0.6], complete=False)], "baseline")
    by_recipe = {row["recipe"]: row for row in rows}
    assert by_recipe["baseline"]["scores"] == [0.50, 0.52, 0.54]
    assert by_recipe["baseline"]["mean"] == pytest.approx(0.52)
    assert by_recipe["baseline"]["std"] == pytest.approx(0.02)
    # 0.51 >= 0.52 - 0.02 holds; 0.48 does not.
    assert by_recipe["fast"]["within_reference_spread"] is True
    assert by_recipe["faster"]["within_reference_spread"] is False
    assert by_recipe["pending"]["mean"] is None
    assert by_recipe["pending"]["within_reference_spread"] is None


def test_the_quality_table_tells_a_task_not_run_from_one_pending():
    from research.studies.time_to_train import report

    mrpc = _cell("baseline", [0.80, 0.82], task="mrpc", metric="f1")
    pending = _cell("fast", [0.7], complete=False, task="mrpc", metric="f1")
    rows = quality.summarize([_cell("baseline", [0.50, 0.54]), mrpc,
                              _cell("fast", [0.51, 0.51]), pending,
                              _cell("baseline_step600", [0.30, 0.32])], "baseline")
    steps = {"baseline": (2900, "target"), "fast": (600, "end of budget"),
             "baseline_step600": (600, "step")}
    for row in rows:
        row["checkpoint_step"], row["checkpoint_at"] = steps[row["recipe"]]
    table = report.quality_markdown({"quality": rows, "reference_recipe": "baseline"})
    assert "| baseline | step 2,900 (target) | 52.00 ± 2.83 (n=2, lr 2e-05) | 81.00 ± 1.41 " \
        "(n=2, lr 2e-05) |" in table
    assert "| fast | step 600 (end of budget) | 51.00 ± 0.00 (n=2, lr 2e-05, within) | pending |" \
        in table
    # The reference's step arm fine-tunes on STS-B only: its MRPC cell is not pending.
    assert "| baseline_step600 | step 600 | 31.00 ± 1.41 (n=2, lr 2e-05, below) | – |" in table


def test_the_goal_needs_every_task_within_and_charges_a_budget_recipe_its_whole_budget():
    from research.studies.time_to_train import report

    cells = [_cell("baseline", [0.50, 0.54]), _cell("baseline", [0.80, 0.82], task="mrpc"),
             _cell("baseline_step600", [0.30, 0.32])]
    # fast: both tasks within; slow_budget: within, but its whole budget costs 0.6x;
    # cheap_but_worse: STS-B below; half_done: MRPC still pending; already_below: STS-B
    # below, MRPC pending.
    for name, stsb, mrpc in [("fast", 0.51, 0.81), ("slow_budget", 0.53, 0.81),
                             ("cheap_but_worse", 0.40, 0.81), ("half_done", 0.52, None),
                             ("already_below", 0.40, None)]:
        cells.append(_cell(name, [stsb, stsb]))
        cells.append(_cell(name, [mrpc or 0.7], task="mrpc", complete=mrpc is not None))
    recipes = [{"name": "baseline", "train_to_budget": False, "seconds_vs_reference": 1.0},
               {"name": "fast", "train_to_budget": False, "seconds_vs_reference": 0.34},
               {"name": "slow_budget", "train_to_budget": True, "seconds_vs_reference": 0.3,
                "seconds_spent_vs_reference": 0.6},
               {"name": "cheap_but_worse", "train_to_budget": False,
                "seconds_vs_reference": 0.2},
               {"name": "half_done", "train_to_budget": False, "seconds_vs_reference": 0.3},
               {"name": "already_below", "train_to_budget": False,
                "seconds_vs_reference": 0.3}]
    results = {"recipes": recipes, "reference_recipe": "baseline",
               "quality": quality.summarize(cells, "baseline")}
    results["goal"] = report.goal(results, ["stsb", "mrpc"], 0.5)
    by_recipe = {c["recipe"]: c for c in results["goal"]["candidates"]}
    assert list(by_recipe) == ["fast", "slow_budget", "cheap_but_worse", "half_done",
                               "already_below"]
    assert results["goal"]["met_by"] == ["fast"]
    assert by_recipe["slow_budget"]["wall_vs_reference"] == 0.6
    assert by_recipe["cheap_but_worse"]["tasks_below"] == ["stsb"]
    assert by_recipe["half_done"]["quality_within"] is None
    assert by_recipe["already_below"]["quality_within"] is False
    text = "\n".join(report.goal_markdown(results))
    assert "| fast | 0.34x | within | met |" in text
    assert "| slow_budget | 0.60x | within | not met |" in text
    assert "| cheap_but_worse | 0.20x | below on stsb | not met |" in text
    assert "| half_done | 0.30x | pending | not met |" in text
    assert "| already_below | 0.30x | below on stsb | not met |" in text
    assert "Met by: fast." in text
    results["goal"] = report.goal(results, ["stsb", "mrpc"], 0.3)
    assert "Not met by any recipe." in "\n".join(report.goal_markdown(results))


def test_an_extended_grid_is_judged_against_the_reference_on_the_same_grid():
    from research.studies.time_to_train import report

    extended = quality.EXTENDED_GRID
    # On the study's grid fast is below (0.48 < 0.52 - 0.02); with the grid extended both
    # rise, the reference more (0.60 +- 0.02), and fast stays below; wide climbs from below
    # to within (0.59).
    cells = [_cell("baseline", [0.50, 0.54]), _cell("baseline", [0.80, 0.82], task="mrpc"),
             _cell("baseline", [0.58, 0.62], chosen=3e-4, grid=extended,
                   every_seed=[(3e-4, 0, 0.58), (3e-4, 1, 0.62), (1e-4, 0, 0.50),
                               (1e-4, 1, 0.54), (2e-5, 0, 0.30)]),
             _cell("fast", [0.48, 0.48]), _cell("fast", [0.81], task="mrpc"),
             _cell("fast", [0.56, 0.56], chosen=2e-4, grid=extended),
             _cell("wide", [0.40, 0.40]), _cell("wide", [0.81], task="mrpc"),
             _cell("wide", [0.59, 0.59], chosen=3e-4, grid=extended)]
    recipes = [{"name": name, "train_to_budget": False, "seconds_vs_reference": wall}
               for name, wall in [("baseline", 1.0), ("fast", 0.3), ("wide", 0.4)]]
    results = {"recipes": recipes, "reference_recipe": "baseline",
               "quality": quality.summarize(cells, "baseline")}
    by_key = {(row["recipe"], row["task"], row["grid"]): row for row in results["quality"]}
    assert by_key["fast", "stsb", quality.STUDY_GRID]["within_reference_spread"] is False
    assert by_key["fast", "stsb", extended]["within_reference_spread"] is False
    assert by_key["wide", "stsb", extended]["within_reference_spread"] is True
    results["goal"] = report.goal(results, ["stsb", "mrpc"], 0.5)
    results["goal_extended_grid"] = report.goal(results, ["stsb", "mrpc"], 0.5, grid=extended)
    assert results["goal"]["met_by"] == []
    # MRPC has no extended grid: its study cell still counts.
    assert results["goal_extended_grid"]["met_by"] == ["wide"]
    for row in results["quality"]:
        row["checkpoint_step"], row["checkpoint_at"] = 100, "target"
    table = "\n".join(report.quality_markdown(results))
    assert "| wide | stsb pearson | 40.00 ± 0.00 (n=2, lr 2e-05, below) | 59.00 ± 0.00 " \
        "(n=2, lr 0.0003, within) |" in table
    # The main table stays on the study's grid.
    assert "| baseline | step 100 (target) | 52.00 ± 2.83 (n=2, lr 2e-05) |" in table
    # The reference on every rate and seed; the others were not asked for it.
    assert "| baseline | stsb pearson | 60.00 ± 2.83 (n=2) | 52.00 ± 2.83 (n=2) | " \
        "30.00 ± 0.00 (n=1) |" in table
    assert "| lr 0.0003 | lr 0.0001 | lr 2e-05 |" in table
    assert "| wide | stsb pearson | 40.00" not in table.split("### Every rate on every seed")[1]
    text = "\n".join(report.goal_markdown(results))
    assert "Not met by any recipe." in text
    assert "### The goal with the extended grid" in text and "Met by: wide." in text


def test_flops_of_the_baseline_step():
    # BERT-mini, batch 128 at length 128, packed 3 per row: P' = min(3 x 20, 19 + 3) = 22.
    shape = flops.StepShape(num_layers=4, hidden_size=256, intermediate_size=1024,
                            vocab_size=30522, seq_length=128, batch_rows=128,
                            prediction_slots=22, nsp_slots=3)
    per_row = (128 * 4 * (4 * 256**2 + 2 * 256 * 1024) + 128 * 4 * 2 * 128 * 256
               + 22 * (256**2 + 256 * 30522) + 3 * (256**2 + 2 * 256))
    assert flops.forward_multiply_adds_per_row(shape) == per_row
    assert flops.training_flops_per_step(shape) == 6 * per_row * 128
    assert shape.token_positions == 16384


def test_a_recipe_may_not_take_the_name_of_a_reference_step_arm(tmp_path):
    values = config_lib.load_yaml(study_spec.study_path("time_to_train"))
    values["recipes"].append({**values["recipes"][0], "name": "baseline_step600"})
    path = tmp_path / "bad.yaml"
    path.write_text(json.dumps(values))
    with pytest.raises(config_lib.ConfigError) as raised:
        spec_lib.load(str(path))
    assert "recipes ['baseline_step600'] have the names of quality.reference_steps'" in \
        str(raised.value)


def _save_checkpoints(model_dir, steps, max_to_keep):
    """Writes `ckpt-<step>` for each step as the trainer does (rotating old ones away)."""
    import tensorflow as tf

    weight = tf.Variable(0.0)
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(weight=weight), str(model_dir),
                                         max_to_keep=max_to_keep, checkpoint_name="ckpt")
    for step in steps:
        weight.assign(float(step))
        manager.save(checkpoint_number=step)


def test_keep_checkpoint_copies_a_whole_listed_checkpoint_with_its_metadata(tmp_path):
    import tensorflow as tf

    run = tmp_path / "run"
    run.mkdir()
    (run / "bert_tf_model.json").write_text("{}")
    (run / "vocab.txt").write_text("[PAD]\n")
    _save_checkpoints(run, [4, 8], max_to_keep=3)
    assert not runner.keep_checkpoint(str(run), 12)  # not written yet
    assert runner.keep_checkpoint(str(run), 4)
    kept = runner.kept_checkpoint(str(run), 4)
    assert kept == str(run / "kept" / "ckpt-4")
    reader = tf.train.load_checkpoint(kept)
    assert reader.get_tensor("weight/.ATTRIBUTES/VARIABLE_VALUE") == 4.0
    assert sorted(p.name for p in (run / "kept").iterdir() if not p.name.startswith("ckpt")) \
        == ["bert_tf_model.json", "vocab.txt"]
    # Rotated away by newer saves: the kept copy stays; one never kept cannot be made.
    _save_checkpoints(run, [12, 16, 20], max_to_keep=3)
    assert not (run / "ckpt-4.index").exists()
    assert runner.keep_checkpoint(str(run), 4)
    assert not runner.keep_checkpoint(str(run), 8)
    # A save not yet listed in the `checkpoint` state file (still being written) is not copied.
    (run / "ckpt-24.index").write_bytes(b"partial")
    assert not runner.keep_checkpoint(str(run), 24)


@pytest.mark.long  # a few seconds: every recipe's config resolved twice
def test_every_recipe_resolves_and_is_measured_alike(tmp_path, shared_file):
    shared_file("vocab", "bert-base-uncased-vocab.txt")
    benchmark = runner.Benchmark(spec_lib.load("time_to_train"), str(tmp_path))
    # No corpus is read to resolve the configs: stand-in paths.
    benchmark._corpus = CorpusFiles([str(tmp_path / "train.txt")],
                                    [str(tmp_path / "heldout.txt")], {})
    benchmark.check_same_measurement()
    shapes = {(r.name, p.name): benchmark.step_shape(r, p)
              for r in benchmark.spec.recipes for p in r.phases}
    base = shapes["baseline", "main"]
    assert (base.seq_length, base.batch_rows, base.prediction_slots, base.nsp_slots) == \
        (128, 128, 22, 3)
    assert shapes["mask_40", "main"].prediction_slots == 54  # 51 + 3: 40 % is not capped
    assert shapes["mlm_only", "main"].nsp_slots == 0
    assert shapes["seq64_then_128", "seq64"].seq_length == 64
    assert shapes["lamb_batch512", "main"].batch_rows == 512
    lamb = benchmark.experiment(benchmark.spec.recipe("lamb_batch512"),
                                benchmark.spec.recipe("lamb_batch512").phases[0])
    assert lamb.optimizer.name == "lamb" and lamb.trainer.gradient_accumulation_steps == 4
    # The best combination: length 64 then 128, no dropout, within half the reference's
    # FLOPs to the target (2,450 steps, research/records/benchmarks/time_to_train).
    best = benchmark.spec.recipe("best_combination")
    phases = [benchmark.experiment(best, phase) for phase in best.phases]
    assert best.train_to_budget
    assert [shapes["best_combination", p.name].seq_length for p in best.phases] == [64, 128]
    assert all(e.model.encoder.hidden_dropout == e.model.encoder.attention_dropout == 0.0
               for e in phases)
    assert all(e.optimizer.decay_steps == e.trainer.train_steps for e in phases)
    # Every recipe trained to its budget is sized to half the reference's cost.
    for recipe in (r for r in benchmark.spec.recipes if r.train_to_budget):
        spent = sum(benchmark.experiment(recipe, p).trainer.train_steps
                    * flops.training_flops_per_step(shapes[recipe.name, p.name])
                    for p in recipe.phases)
        assert spent <= 0.5 * 2450 * flops.training_flops_per_step(base), recipe.name
    assert [shapes[name, "seq64"].batch_rows
            for name in ("small_batch", "batch_96", "batch_192")] == [64, 96, 192]
    # A recipe evaluated on other held-out batches is refused.
    recipe = benchmark.spec.recipe("no_dropout")
    recipe.phases[0].overrides.append("data.short_seq_prob=0.5")
    with pytest.raises(config_lib.ConfigError) as raised:
        benchmark.check_same_measurement()
    assert "recipe 'no_dropout' phase 'main' would be evaluated on other held-out" in \
        str(raised.value)


def test_first_crossing():
    assert runner.first_crossing([(20, 0.1), (40, 0.2), (60, 0.3)], 0.2) == 1
    assert runner.first_crossing([(20, 0.1)], 0.2) is None


def _run(out, *extra, study="time_to_train"):
    command = [sys.executable, "-m", "research.study", study, "--out", str(out),
               "--profile", "ci", *extra]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
    result = subprocess.run(command, cwd=study_spec.REPO_ROOT, env=env, capture_output=True,
                            text=True, timeout=1800)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


@pytest.mark.long
def test_ci_profile_trains_times_reports_and_resumes(tmp_path, shared_file):
    shared_file("vocab", "bert-base-uncased-vocab.txt")
    out = tmp_path / "ttt"
    first = _run(out)
    # Nothing reaches the CI target: every phase runs to its budget, the second phase of
    # the two-phase recipe from the first one's weights.
    assert first.count(": running") == 3
    log = (out / "runs" / "seq64_then_128" / "seq128" / "train.log").read_text()
    assert "--init_checkpoint " + str(out / "runs" / "seq64_then_128" / "seq64") in log
    assert "initialised" in log
    results = json.loads((out / "results.json").read_text())
    by_name = {r["name"]: r for r in results["recipes"]}
    assert [r["status"] for r in results["recipes"]] == ["budget"] * 2
    two_phase = by_name["seq64_then_128"]
    assert [p["seq_length"] for p in two_phase["phases"]] == [16, 32]
    # The second phase's evaluations continue the first one's steps.
    assert [p["step"] for p in two_phase["curve"]] == [4, 8, 12, 16]
    # A rerun trains nothing.
    assert ": running" not in _run(out)
    # With a target every recipe meets at its first evaluation: steps, tokens and FLOPs
    # to target are those of 4 steps, read from the same curves.
    _run(out, "--target", "0.0", "--report_only")
    results = json.loads((out / "results.json").read_text())
    for recipe in results["recipes"]:
        phase = recipe["phases"][0]
        assert recipe["status"] == "reached" and recipe["steps_to_target"] == 4
        assert recipe["bracket"] == [0, 4]
        assert recipe["flops_to_target"] == 4 * phase["flops_per_step"]
        assert recipe["tokens_to_target"] == 4 * phase["token_positions_per_step"]
        assert recipe["seconds_to_target"] is None  # no timing run yet
    # The timing run: every phase of every recipe, then wall times and their plot.
    timed = _run(out, "--timing_only", "--target", "0.0")
    assert timed.count("s/step") == 3 and ": running" not in timed
    results = json.loads((out / "results.json").read_text())
    assert set(results["timing"]["phases"]) == {"baseline/main", "seq64_then_128/seq64",
                                                "seq64_then_128/seq128"}
    baseline = next(r for r in results["recipes"] if r["name"] == "baseline")
    seconds = results["timing"]["phases"]["baseline/main"]["seconds_per_step"]
    assert baseline["seconds_to_target"] == pytest.approx(4 * seconds)
    assert baseline["seconds_vs_reference"] == 1.0
    report = (out / "report.md").read_text()
    assert "| paper recipe (baseline) | reached | 4 (0–4, 100.0 %) |" in report
    for plot in ("accuracy_vs_flops.png", "accuracy_vs_wall_time.png"):
        assert (out / "plots" / plot).read_bytes()[:4] == b"\x89PNG"
    # Quality: the reference and the fastest recipe fine-tuned from their checkpoints at
    # the target (step 4), by the study's CI suite; a rerun trains nothing.
    fastest = min(results["recipes"], key=lambda r: r["seconds_to_target"])["name"]
    # --recipes narrows the fine-tuning to those of the chosen recipes (and the reference's
    # kept step checkpoints).
    narrowed = _run(out, "--quality", "--target", "0.0", "--recipes", "baseline")
    assert "fine-tuning at the target: baseline\n" in narrowed
    assert {p.name for p in (out / "quality" / "finetune").iterdir()} == \
        {"baseline", "baseline_step4"}
    tuned = _run(out, "--quality", "--target", "0.0")
    assert f"fine-tuning at the target: {', '.join(dict.fromkeys(['baseline', fastest]))}" in tuned
    results = json.loads((out / "results.json").read_text())
    rows = {row["recipe"]: row for row in results["quality"]
            if row["grid"] == quality.STUDY_GRID}
    # Besides the crossings, the reference's checkpoint kept at step 4 (quality.reference_steps).
    assert set(rows) == {"baseline", fastest, "baseline_step4"}
    assert all(r["task"] == "stsb" for r in rows.values())
    assert all(row["complete"] and len(row["scores"]) == 1 for row in rows.values())
    # The grid's recipes (the ci profile: the reference) are tuned again over the extended
    # grid (3e-4 added on STS-B), reusing the study grid's run; the fastest recipe and the
    # reference's step arm are not.
    wide = {row["recipe"]: row for row in results["quality"]
            if row["grid"] == quality.EXTENDED_GRID}
    assert set(wide) == {"baseline"}
    assert all(row["complete"] for row in wide.values())
    assert {p.name for p in (out / "quality" / "finetune" / "baseline" / "stsb").iterdir()} \
        == {"lr0.0001_seed0", "lr0.0003_seed0"}
    assert "### With the extended grid" in (out / "report.md").read_text()
    # The reference (every_seed_for) also has its every_seed_rates on every seed.
    assert [rate["learning_rate"] for rate in wide["baseline"]["every_seed"]] == [3e-4, 1e-4]
    assert "### Every rate on every seed" in (out / "report.md").read_text()
    assert (rows["baseline_step4"]["checkpoint_step"], rows["baseline_step4"]["checkpoint_at"]) \
        == (4, "step")
    (step_run,) = (out / "quality" / "finetune" / "baseline_step4" / "stsb").iterdir()
    assert f"--init_checkpoint {out / 'runs' / 'baseline' / 'main' / 'kept' / 'ckpt-4'}" in (
        step_run / "train.log").read_text()
    assert "| baseline_step4 | step 4 |" in (out / "report.md").read_text()
    run_dir = out / "quality" / "finetune" / fastest / "stsb" / "lr0.0001_seed0"
    crossing = next(r for r in results["recipes"] if r["name"] == fastest)
    phase = next(p["name"] for p in crossing["phases"] if p["state"] == "reached")
    assert f"--init_checkpoint {out / 'runs' / fastest / phase / 'ckpt-4'}" in (
        run_dir / "train.log").read_text()
    assert "## Quality at the target" in (out / "report.md").read_text()
    # The goal's verdict on the fast recipe (when it is not the reference: tiny steps time
    # close together), charged its wall time to the target.
    candidates = results["goal"]["candidates"]
    assert [c["recipe"] for c in candidates] == [n for n in [fastest] if n != "baseline"]
    assert all(c["wall_vs_reference"] == crossing["seconds_vs_reference"] for c in candidates)
    assert ("## Goal" in (out / "report.md").read_text()) == bool(candidates)
    assert ": running" not in _run(out, "--quality", "--target", "0.0")
    # Records: every phase's config, evaluation, curves and times, the report, the timing
    # and the fine-tuning runs; no checkpoint, event file or corpus.
    kept = tmp_path / "records"
    _run(out, "--target", "0.0", "--report_only", "--records", str(kept))
    files = {str(path.relative_to(kept)) for path in kept.rglob("*") if path.is_file()}
    for phase in ("baseline/main", "seq64_then_128/seq64", "seq64_then_128/seq128"):
        assert {f"runs/{phase}/{name}" for name in ("params.yaml", "eval_results.json",
                                                     "scalars.json")} <= files
    assert {"report.md", "results.json", "timing.json"} <= files
    assert f"quality/finetune/{fastest}/stsb/lr0.0001_seed0/eval_results.json" in files
    assert not [name for name in files if "ckpt-" in name or "tfevents" in name
                or name.startswith("corpus")]


@pytest.mark.long
@pytest.mark.full
def test_a_recipe_trained_to_its_budget_runs_past_the_target(tmp_path, shared_file):
    shared_file("vocab", "bert-base-uncased-vocab.txt")
    values = config_lib.load_yaml(study_spec.study_path("time_to_train"))
    ci = values["profiles"]["ci"]
    for recipe in ci["recipes"]:
        recipe["train_to_budget"] = recipe["name"] == "seq64_then_128"
    study = tmp_path / "time_to_train_budget.yaml"
    study.write_text(json.dumps(values))
    out = tmp_path / "ttt"
    args = ("--recipes", "seq64_then_128", "--target", "0.0")
    first = _run(out, *args, study=str(study))
    # Past its crossing at the first evaluation (step 4), through both phases of 8 steps.
    assert "stopping the trainer" not in first
    assert "seq64_then_128: trained to the end of its budget" in first
    results = json.loads((out / "results.json").read_text())
    recipe = next(r for r in results["recipes"] if r["name"] == "seq64_then_128")
    assert recipe["status"] == "reached" and recipe["steps_to_target"] == 4
    assert [(p["state"], p["steps_trained"]) for p in recipe["phases"]] == [("reached", 8)] * 2
    assert recipe["steps_spent"] == 16
    assert recipe["flops_spent"] == sum(8 * p["flops_per_step"] for p in recipe["phases"])
    assert "Trained to the end of their budget" in (out / "report.md").read_text()
    # Its quality is measured on the model it ends with: the last phase's last checkpoint.
    benchmark = runner.Benchmark(spec_lib.load(str(study), "ci"), str(out), target=0.0)
    assert quality.quality_checkpoint(benchmark, "seq64_then_128") == str(
        out / "runs" / "seq64_then_128" / "seq128" / "ckpt-8")
    assert ": running" not in _run(out, *args, study=str(study))


@pytest.mark.long
@pytest.mark.full
def test_a_run_that_reaches_the_target_is_stopped_and_not_trained_again(tmp_path, shared_file):
    shared_file("vocab", "bert-base-uncased-vocab.txt")
    # The CI profile with a budget far beyond the first evaluation.
    values = config_lib.load_yaml(study_spec.study_path("time_to_train"))
    values["profiles"]["ci"]["overrides"].append("trainer.train_steps=3000")
    study = tmp_path / "time_to_train_long.yaml"
    study.write_text(json.dumps(values))
    out = tmp_path / "ttt"
    args = ("--recipes", "baseline", "--target", "0.0")
    assert "stopping the trainer" in _run(out, *args, study=str(study))
    results = json.loads((out / "results.json").read_text())
    baseline = results["recipes"][0]
    assert baseline["status"] == "reached" and baseline["steps_to_target"] == 4
    # Stopped long before its budget, after a checkpoint.
    (phase,) = baseline["phases"]
    assert phase["state"] == "reached" and phase["steps_trained"] < 3000
    times = (out / "runs" / "baseline" / "main" / "unit_times.jsonl").read_text()
    assert json.loads(times.splitlines()[-1])["stopped_at_target"] is True
    assert ": running" not in _run(out, *args, study=str(study))
