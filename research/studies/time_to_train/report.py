"""The benchmark's results.json, report.md and plots, read back from the run folders.

Per recipe: its phases' held-out curves joined end to end (a later phase's
steps count after the earlier phases' whole budgets), the first evaluation at
or above the target (MLPerf's rule: the run is done at the evaluation that
reaches it) and the one before it, which bracket the crossing; steps, token
positions and training FLOPs up to that evaluation (`flops`); and, once a
timing run exists (`timing`), wall time = each phase's steps x its measured
time per step. Speed-ups are relative to the reference recipe.
"""

import json
import math
import os

from research.studies.time_to_train import flops, quality, timing
from research.studies.time_to_train import verdict as verdict_lib

RESULTS_FILE = "results.json"
REPORT_FILE = "report.md"
PLOTS_DIR = "plots"
# The crossing is placed within this fraction of the steps to target.
BRACKET_GOAL = 0.02


def recipe_results(benchmark, recipe, timings: dict | None) -> dict:
    """The record of one recipe as far as it has trained.

    Args:
      benchmark: a `runner.Benchmark`.
      recipe: one of its `RecipeSpec`s.
      timings: `timing.json`'s "phases" ({"recipe/phase": {"seconds_per_step": ...}}) or None.
    """
    target = benchmark.target
    points, phases, offset = [], [], 0
    tokens_done, flops_done, seconds_done = 0, 0.0, 0.0
    status = "pending"
    for phase in recipe.phases:
        experiment = benchmark.experiment(recipe, phase)
        shape = flops.step_shape(experiment)
        per_step_flops = flops.training_flops_per_step(shape)
        seconds = (timings or {}).get(benchmark.timing_key(recipe, phase),
                                      {}).get("seconds_per_step")
        if seconds is None:
            seconds_done = None  # without every phase's timing there is no wall time
        budget = experiment.trainer.train_steps
        curve = benchmark.eval_curve(benchmark.phase_dir(recipe, phase))
        state = benchmark.phase_state(recipe, phase)
        for step, value in curve:
            points.append({"step": offset + step, "phase": phase.name, "value": value,
                           "tokens": tokens_done + step * shape.token_positions,
                           "flops": flops_done + step * per_step_flops,
                           "seconds": (None if seconds_done is None
                                       else seconds_done + step * seconds)})
        phases.append({"name": phase.name, "config": phase.config, "state": state,
                       "steps_budget": budget, "steps_trained": curve[-1][0] if curve else 0,
                       "seq_length": shape.seq_length, "batch_rows": shape.batch_rows,
                       "prediction_slots": shape.prediction_slots, "nsp_slots": shape.nsp_slots,
                       "token_positions_per_step": shape.token_positions,
                       "flops_per_step": per_step_flops, "seconds_per_step": seconds,
                       "optimizer": experiment.optimizer.name,
                       "learning_rate": experiment.optimizer.learning_rate})
        if state == "reached" and not recipe.train_to_budget:
            status = "reached"
            break
        if state == "open":
            status = "running" if curve or offset else "pending"
            break
        offset += budget
        tokens_done += budget * shape.token_positions
        flops_done += budget * per_step_flops
        if seconds_done is not None:
            seconds_done += budget * seconds
    else:
        # Every phase trained to its last step (a train_to_budget recipe past its crossing).
        status = "reached" if any(p["value"] >= target for p in points) else "budget"
    result = {"name": recipe.name, "group": recipe.group, "label": recipe.label,
              "status": status,
              "train_to_budget": recipe.train_to_budget,
              "eval_every": recipe.eval_every, "phases": phases, "curve": points,
              "best": max(points, key=lambda p: p["value"]) if points else None}
    if recipe.train_to_budget and status in ("reached", "budget"):
        # What the whole budget cost: the model its quality row fine-tunes.
        result.update({"steps_spent": offset, "tokens_spent": tokens_done,
                       "flops_spent": flops_done, "seconds_spent": seconds_done})
    crossing = next((i for i, p in enumerate(points) if p["value"] >= target), None)
    if crossing is not None:
        at = points[crossing]
        before = points[crossing - 1]["step"] if crossing else 0
        result.update({
            "steps_to_target": at["step"], "tokens_to_target": at["tokens"],
            "flops_to_target": at["flops"], "seconds_to_target": at["seconds"],
            "bracket": [before, at["step"]],
            "bracket_fraction": (at["step"] - before) / at["step"],
        })
    return result


def reference_mean(benchmark, timings: dict | None) -> dict | None:
    """The reference recipe's runs pooled, once every one has trained its whole budget.

    The mean curve is the mean over runs of the held-out value at each evaluation they all
    have; the reference's time to the target is that curve's first evaluation at or above
    it (its steps, FLOPs and, with a timing run, wall time: the runs share them). With
    `target.from_reference` the target is the mean of the runs' final values, where the
    mean curve ends, so it always reaches it. None while a run is unfinished.

    Args:
      benchmark: a `runner.Benchmark`.
      timings: `timing.json`'s "phases", or None.
    """
    rows = [recipe_results(benchmark, recipe, timings)
            for recipe in benchmark.spec.reference_rows()]
    if any(row["status"] not in ("reached", "budget") for row in rows):
        return None
    values = [{point["step"]: point["value"] for point in row["curve"]} for row in rows]
    shared = [point for point in rows[0]["curve"]
              if all(point["step"] in run for run in values)]
    curve = [{**point, "value": sum(run[point["step"]] for run in values) / len(values)}
             for point in shared]
    crossing = next((point for point in curve if point["value"] >= benchmark.target), None)
    return {"runs": [row["name"] for row in rows],
            "finals": [row["curve"][-1]["value"] if row["curve"] else None for row in rows],
            "curve": curve,
            "steps_to_target": crossing and crossing["step"],
            "flops_to_target": crossing and crossing["flops"],
            "seconds_to_target": crossing and crossing["seconds"]}


def reference_value_at(curve: list[dict], at_flops: float) -> float | None:
    """The reference curve's held-out value at `at_flops`, linearly interpolated between
    its evaluations (None outside the evaluated range).

    Args:
      curve: the reference's `curve` points (with "flops" and "value").
      at_flops: training FLOPs.
    """
    for before, after in zip(curve, curve[1:]):
        if before["flops"] <= at_flops <= after["flops"]:
            share = (at_flops - before["flops"]) / (after["flops"] - before["flops"])
            return before["value"] + share * (after["value"] - before["value"])
    return None


def _ratio(mine, theirs):
    return mine / theirs if mine is not None and theirs else None


def build(benchmark) -> dict:
    """The results dict (what results.json holds) of a `runner.Benchmark`."""
    timings = timing.read(benchmark.out_dir)
    recipes = [recipe_results(benchmark, recipe, timings and timings["phases"])
               for recipe in benchmark.spec.recipes]
    reference = next(r for r in recipes if r["name"] == benchmark.spec.reference_row().name)
    pooled = (reference_mean(benchmark, timings and timings["phases"])
              if len(benchmark.spec.reference_rows()) > 1 else None)
    if pooled is not None:
        # Replicates: every ratio is against the runs' mean curve, not one run.
        reference = {**reference, "curve": pooled["curve"],
                     **{f"{key}_to_target": pooled[f"{key}_to_target"]
                        for key in ("steps", "flops", "seconds")}}
    for result in recipes:
        last = result["curve"][-1] if result["curve"] else None
        result["reference_at_same_flops"] = (
            None if last is None or result["name"] == reference["name"]
            else reference_value_at(reference["curve"], last["flops"]))
        for key in ("flops", "seconds", "steps"):
            theirs = reference.get(f"{key}_to_target")
            result[f"{key}_vs_reference"] = _ratio(result.get(f"{key}_to_target"), theirs)
            if "steps_spent" in result:
                result[f"{key}_spent_vs_reference"] = _ratio(result[f"{key}_spent"], theirs)
    target = benchmark.target
    results = {"benchmark": benchmark.spec.name, "profile": benchmark.profile,
               "target": {"metric": benchmark.spec.target.metric,
                          "value": None if math.isinf(target) else target,
                          "source": benchmark.target_source},
               "reference_recipe": benchmark.spec.reference_row().name,
               "reference_group": benchmark.spec.reference_recipe,
               "reference_mean": pooled,
               "budgets": benchmark.fixed_budgets(),
               "eval_overrides": benchmark.spec.eval_overrides,
               "flops_formula": flops.FORMULA,
               "timing": timings, "recipes": recipes, "quality": [], "goal": None}
    if os.path.isdir(os.path.join(benchmark.out_dir, quality.QUALITY_DIR)):
        study = quality.QualityStudy(benchmark, quality.recipes_to_show(benchmark, results))
        results["quality"] = quality.summarize(study.cells(execute=False),
                                               benchmark.spec.reference_row().name)
        by_name = {r["name"]: r for r in recipes}
        arm_steps = benchmark.spec.reference_step_arms()
        for row in results["quality"]:
            # The checkpoint's step and what it is: the recipe's crossing, the end of a
            # train_to_budget recipe, or the reference at one of quality.reference_steps.
            if row["recipe"] in arm_steps:
                row["checkpoint_at"], row["checkpoint_step"] = "step", arm_steps[row["recipe"]]
            elif by_name[row["recipe"]]["train_to_budget"]:
                row["checkpoint_at"] = "end of budget"
                row["checkpoint_step"] = by_name[row["recipe"]].get("steps_spent")
            else:
                row["checkpoint_at"] = "target"
                row["checkpoint_step"] = by_name[row["recipe"]].get("steps_to_target")
        spec = benchmark.spec.quality
        if spec.verdict is not None:
            results["verdict"] = pooled_verdict(results, spec.tasks, spec.verdict)
        results["goal"] = goal(results, spec.tasks, spec.goal_wall_fraction)
        if spec.extended_grids:
            results["goal_extended_grid"] = goal(results, spec.tasks, spec.goal_wall_fraction,
                                                 grid=quality.EXTENDED_GRID)
    return results


def pooled_verdict(results: dict, tasks: list[str], settings) -> dict:
    """The pre-registered verdict on every fine-tuned recipe other than the reference.

    Each recipe's replicates are its pretraining runs, each row's seed scores (on the
    study's grid: with `quality.learning_rates`, the fixed rate's) that run's fine-tuning
    scores; `verdict.judge` compares them with the reference's, in points.

    Args:
      results: `build`'s results, with their quality rows.
      tasks: `quality.tasks`.
      settings: the `spec.VerdictSpec`.
    """
    groups = {r["name"]: r["group"] for r in results["recipes"]}
    scores = {}  # group -> task -> [seed scores in points, one list per run]
    for row in results["quality"]:
        group = groups.get(row["recipe"])
        if group is None or row["grid"] != quality.STUDY_GRID or not row["complete"]:
            continue  # a step arm, another grid, or not finished
        scores.setdefault(group, {}).setdefault(row["task"], []).append(
            [100 * score for score in row["scores"]])
    reference = scores.get(results["reference_group"], {})
    expected = {group: sum(1 for r in results["recipes"] if r["group"] == group)
                for group in scores}
    candidates = []
    for group, by_task in scores.items():
        if group == results["reference_group"]:
            continue
        judged = verdict_lib.judge(by_task, reference, tasks, margin=settings.margin,
                                   resamples=settings.resamples,
                                   confidence=settings.confidence, seed=settings.seed)
        runs = {task: len(by_task.get(task, [])) for task in tasks}
        candidates.append({"recipe": group, "runs": runs, "expected_runs": expected[group],
                           **judged})
    return {"margin": settings.margin, "confidence": settings.confidence,
            "resamples": settings.resamples, "seed": settings.seed, "tasks": tasks,
            "reference_runs": {task: len(reference.get(task, [])) for task in tasks},
            "candidates": candidates}


def verdict_markdown(results: dict) -> list[str]:
    """The report's section on the pre-registered verdict (none before `--quality`)."""
    verdict = results.get("verdict")
    if not verdict or not verdict["candidates"]:
        return []
    share = f"{100 * verdict['confidence']:.0f} %"
    lines = ["", "## Pre-registered verdict", "",
             f"Candidate mean minus reference mean (points; an arm's mean is the mean over "
             f"its pretraining runs of each run's mean over fine-tuning seeds), with a {share} "
             f"hierarchical bootstrap interval ({verdict['resamples']:,} draws of runs, then of "
             f"seeds within each run; seed {verdict['seed']}). A candidate keeps quality when "
             f"every lower bound is above -{verdict['margin']:g}. Reference runs per task: "
             + ", ".join(f"{task} {n}" for task, n in verdict["reference_runs"].items()) + ".",
             "", "| recipe | " + " | ".join(verdict["tasks"]) + " | keeps quality |",
             "|---|" + "---|" * len(verdict["tasks"]) + "---|"]
    for c in verdict["candidates"]:
        by_task = {d["task"]: d for d in c["differences"]}
        cells = [("pending" if task not in by_task else
                  f"{by_task[task]['difference']:+.2f} [{by_task[task]['low']:+.2f}, "
                  f"{by_task[task]['high']:+.2f}] (runs {c['runs'][task]})")
                 for task in verdict["tasks"]]
        kept = {True: "yes", False: "no", None: "pending"}[c["keeps_quality"]]
        lines.append(f"| {c['recipe']} | " + " | ".join(cells) + f" | {kept} |")
    return lines


def goal(results: dict, tasks: list[str], wall_fraction: float,
         grid: str = quality.STUDY_GRID) -> dict:
    """Which fine-tuned recipes meet the benchmark's goal: the reference's quality on every
    task (within its spread or above) in at most `wall_fraction` of its wall time to the
    target. A train_to_budget recipe is charged its whole budget (the model it fine-tunes).

    Args:
      results: `build`'s results, with their quality rows.
      tasks: the quality tasks every candidate must hold (`quality.tasks`).
      wall_fraction: the goal's share of the reference's wall time (`quality.goal_wall_fraction`).
      grid: judge tasks on the study's grid, or with `quality.EXTENDED_GRID` on the extended
        grid where a task has one (the study's elsewhere).
    """
    by_name = {r["name"]: r for r in results["recipes"]}
    cells = {(row["recipe"], row["task"]): row for row in results["quality"]
             if row["grid"] == quality.STUDY_GRID}
    if grid == quality.EXTENDED_GRID:
        cells.update({(row["recipe"], row["task"]): row for row in results["quality"]
                      if row["grid"] == quality.EXTENDED_GRID})
    candidates = []
    for name in dict.fromkeys(row["recipe"] for row in results["quality"]):
        recipe = by_name.get(name)
        reference = results.get("reference_group", results["reference_recipe"])
        if recipe is None or recipe.get("group", name) == reference:
            continue  # the reference itself (a run of it), or one of its step arms
        wall = recipe.get("seconds_spent_vs_reference" if recipe["train_to_budget"]
                          else "seconds_vs_reference")
        verdicts = [cells[name, task]["within_reference_spread"] if (name, task) in cells
                    else None for task in tasks]
        # One task below decides; otherwise a task not yet fine-tuned leaves it open.
        quality_held = (False if False in verdicts else None if None in verdicts else True)
        candidates.append({
            "recipe": name, "wall_vs_reference": wall, "quality_within": quality_held,
            "tasks_below": [t for t, v in zip(tasks, verdicts) if v is False],
            "meets": bool(quality_held and wall is not None and wall <= wall_fraction)})
    return {"wall_fraction": wall_fraction, "tasks": tasks, "grid": grid,
            "candidates": candidates, "met_by": [c["recipe"] for c in candidates if c["meets"]]}


def goal_markdown(results: dict) -> list[str]:
    """The report's verdicts on the goal, on the study's grid and, where the benchmark has
    one, on the extended grid (none before `--quality` has run)."""
    verdict = results.get("goal")
    if not verdict or not verdict["candidates"]:
        return []
    share = f"{100 * verdict['wall_fraction']:.0f} %"
    lines = _verdict_markdown(
        verdict, "## Goal",
        f"The reference's quality ({', '.join(verdict['tasks'])}, each within its spread or "
        f"above) in at most {share} of its wall time to the target; a recipe trained to its "
        "budget is charged the whole budget. Fine-tuned with the study's grid.")
    extended = results.get("goal_extended_grid")
    if extended and extended["candidates"]:
        lines += _verdict_markdown(
            extended, "### The goal with the extended grid",
            "The same goal, each task judged on its extended grid where it has one (the "
            "study's grid elsewhere).")
    return lines


def _verdict_markdown(verdict: dict, title: str, description: str) -> list[str]:
    lines = ["", title, "", description, "",
             "| recipe | wall time vs reference | quality | goal |", "|---|---|---|---|"]
    for c in verdict["candidates"]:
        quality_text = {True: "within", None: "pending"}.get(
            c["quality_within"], "below on " + ", ".join(c["tasks_below"]))
        lines.append(f"| {c['recipe']} | "
                     f"{_number(c['wall_vs_reference'], digits=2, suffix='x')} | "
                     f"{quality_text} | {'met' if c['meets'] else 'not met'} |")
    met = verdict["met_by"]
    lines += ["", f"Met by: {', '.join(met)}." if met else "Not met by any recipe."]
    return lines


def write(benchmark) -> dict:
    """Writes results.json, report.md and the plots of a `runner.Benchmark`; returns the results."""
    results = build(benchmark)
    os.makedirs(benchmark.out_dir, exist_ok=True)
    path = os.path.join(benchmark.out_dir, RESULTS_FILE)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)
    os.replace(path + ".tmp", path)
    with open(os.path.join(benchmark.out_dir, REPORT_FILE), "w", encoding="utf-8") as f:
        f.write(markdown(results))
    plot(results, os.path.join(benchmark.out_dir, PLOTS_DIR))
    return results


def _number(value, scale=1.0, digits=2, suffix=""):
    return "–" if value is None else f"{value / scale:.{digits}f}{suffix}"


def markdown(results: dict) -> str:
    """The text of report.md, from `build`'s results."""
    target = results["target"]
    timings = results["timing"]
    value = ("(pending: the reference's runs)" if target["value"] is None
             else f"{100 * target['value']:.2f} %")
    lines = [f"# Time to train: {target['metric']} >= {value} held out",
             "",
             f"Profile `{results['profile']}`. Target: {target['source']}; measured on the same "
             f"held-out batches for every recipe ({', '.join(results['eval_overrides'])}). "
             "A recipe is done at its first evaluation at or above the target (the bracket is "
             "the evaluation before it and that one); steps, token positions and FLOPs count "
             f"up to it. Training FLOPs: {results['flops_formula']}; see "
             "`research/studies/time_to_train/flops.py`.", ""]
    if timings:
        machine = timings["machine"]
        lines += [f"Wall time = steps x time per step, every recipe timed in one run "
                  f"({timings['started_utc']}, {machine['cpu']}, {machine['cpu_count']} cores, "
                  f"load average {machine['load_average_before']} before), evaluation "
                  "excluded.", ""]
    else:
        lines += ["No timing run yet (`--timing_only`): wall times are blank.", ""]
    lines += ["| recipe | status | steps to target (bracket) | token positions | training "
              "FLOPs | FLOPs vs ref | s/step | wall time | wall vs ref | best held-out |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results["recipes"]:
        if "steps_to_target" in r:
            low, high = r["bracket"]
            steps = f"{high} ({low}–{high}, {100 * r['bracket_fraction']:.1f} %)"
        else:
            steps = "–"
        per_step = " + ".join(_number(p["seconds_per_step"], digits=3) for p in r["phases"])
        best = r["best"]
        best_text = (f"{100 * best['value']:.2f} % at {best['step']}" if best else "–")
        lines.append(
            f"| {r['label'] or r['name']} | {r['status']} | {steps} | "
            f"{_number(r.get('tokens_to_target'), 1e6, 1, ' M')} | "
            f"{_number(r.get('flops_to_target'), 1e15, 3, ' P')} | "
            f"{_number(r.get('flops_vs_reference'), digits=2, suffix='x')} | {per_step} | "
            f"{_number(r.get('seconds_to_target'), 3600, 2, ' h')} | "
            f"{_number(r.get('seconds_vs_reference'), digits=2, suffix='x')} | {best_text} |")
    compared = [r for r in results["recipes"] if r["status"] in ("budget", "running")
                and r.get("reference_at_same_flops") is not None]
    if compared:
        lines += ["", "Not (yet) at the target, at the last evaluation against the reference at "
                  "the same training FLOPs: " + "; ".join(
                      f"{r['label'] or r['name']} {100 * r['curve'][-1]['value']:.2f} % at "
                      f"step {r['curve'][-1]['step']} against "
                      f"{100 * r['reference_at_same_flops']:.2f} %" for r in compared) + "."]
    spent = [r for r in results["recipes"] if "steps_spent" in r]
    if spent:
        lines += ["", "Trained to the end of their budget (past the target; the model their "
                  "quality row fine-tunes): " + "; ".join(
                      f"{r['label'] or r['name']} {r['steps_spent']:,} steps, "
                      f"{_number(r['flops_spent'], 1e15, 3, ' P')} "
                      f"({_number(r['flops_spent_vs_reference'], digits=2, suffix='x')} the "
                      "reference's to target), wall time "
                      f"{_number(r['seconds_spent'], 3600, 2, ' h')} "
                      f"({_number(r['seconds_spent_vs_reference'], digits=2, suffix='x')}), "
                      f"held-out {100 * r['curve'][-1]['value']:.2f} % at the end"
                      for r in spent) + "."]
    wide = [r["name"] for r in results["recipes"]
            if r.get("bracket_fraction", 0) > BRACKET_GOAL]
    lines += ["", "Statuses: reached (target met), budget (last step without meeting it), "
              "running (partly trained), pending."]
    if wide:
        lines += ["", f"Bracket wider than {100 * BRACKET_GOAL:.0f} % of the steps to target "
                  f"(evaluate more often to place the crossing): {', '.join(wide)}."]
    lines += ["", "## Phases", "",
              "| recipe | phase | state | steps (budget) | length | rows/step | prediction "
              "slots/row | NSP slots/row | optimizer, peak lr | GFLOP/step |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results["recipes"]:
        for p in r["phases"]:
            lines.append(f"| {r['name']} | {p['name']} | {p['state']} | {p['steps_trained']} "
                         f"({p['steps_budget']}) | {p['seq_length']} | {p['batch_rows']} | "
                         f"{p['prediction_slots']} | {p['nsp_slots']} | {p['optimizer']}, "
                         f"{p['learning_rate']:g} | {p['flops_per_step'] / 1e9:.4g} |")
    lines += quality_markdown(results)
    lines += verdict_markdown(results)
    lines += goal_markdown(results)
    lines += ["", "Plots: `plots/accuracy_vs_flops.png`, `plots/accuracy_vs_wall_time.png` "
              "(after a timing run).", ""]
    return "\n".join(lines)


def quality_markdown(results: dict) -> list[str]:
    """The report's fine-tuning table (none before `--quality` has run)."""
    rows = results["quality"]
    if not rows:
        return []
    tasks = list(dict.fromkeys(row["task"] for row in rows))
    recipes = list(dict.fromkeys(row["recipe"] for row in rows))
    cells = {(row["recipe"], row["task"]): row for row in rows
             if row["grid"] == quality.STUDY_GRID}
    checkpoints = {row["recipe"]: (row["checkpoint_step"], row["checkpoint_at"]) for row in rows}
    metrics = {row["task"]: row["main_metric"] for row in rows}
    reference = results["reference_recipe"]
    lines = ["", "## Quality at the target", "",
             "Each recipe's checkpoint at its crossing evaluation (a recipe trained to its "
             "budget: its last checkpoint), fine-tuned with the study's grid: every learning "
             "rate on the first seed, the best one on all seeds; mean ± "
             "standard deviation over those seeds (dev set, x 100). Within: the mean is at "
             f"least the reference's mean minus its standard deviation (reference: "
             f"{reference}). Rows `{reference}_step<N>`: the reference's own checkpoint at "
             "step N, before the target, fine-tuned the same way (a fast recipe beside the "
             "reference at its step count: its changes against its fewer updates).", "",
             "| recipe | checkpoint | " +
             " | ".join(f"{task} {metrics[task]}" for task in tasks) + " |",
             "|---|---|" + "---|" * len(tasks)]
    for recipe in recipes:
        # No cell: not one of the arm's tasks (quality.reference_steps_tasks).
        texts = [_quality_cell(cells.get((recipe, task)), reference) for task in tasks]
        step, at = checkpoints[recipe]
        where = ("–" if step is None
                 else f"step {step:,}" + ("" if at == "step" else f" ({at})"))
        lines.append(f"| {recipe} | {where} | " + " | ".join(texts) + " |")
    extended = [row for row in rows if row["grid"] == quality.EXTENDED_GRID]
    if extended:
        lines += ["", "### With the extended grid", "",
                  "The tasks of `quality.extended_grids`, tuned again over the study's grid "
                  "plus the extra rates (the study's runs reused), the best rate on all seeds; "
                  "within: against the reference on the same grid.", "",
                  "| recipe | task | study's grid | extended grid |", "|---|---|---|---|"]
        for row in extended:
            lines.append(f"| {row['recipe']} | {row['task']} {row['main_metric']} | "
                         f"{_quality_cell(cells.get((row['recipe'], row['task'])), reference)}"
                         f" | {_quality_cell(row, reference)} |")
    every_seed = [row for row in extended if row["every_seed"]]
    if every_seed:
        rates = sorted({rate["learning_rate"] for row in every_seed
                        for rate in row["every_seed"]}, reverse=True)
        lines += ["", "### Every rate on every seed", "",
                  "The recipes of `every_seed_for`: each rate of the extended grid on every "
                  "seed, whatever the first seed chose (mean ± standard deviation, seeds).", "",
                  "| recipe | task | " + " | ".join(f"lr {rate:g}" for rate in rates) + " |",
                  "|---|---|" + "---|" * len(rates)]
        for row in every_seed:
            by_rate = {rate["learning_rate"]: rate for rate in row["every_seed"]}
            texts = [("–" if rate not in by_rate else
                      f"{100 * by_rate[rate]['mean']:.2f} ± {100 * by_rate[rate]['std']:.2f} "
                      f"(n={len(by_rate[rate]['scores'])})") for rate in rates]
            lines.append(f"| {row['recipe']} | {row['task']} {row['main_metric']} | "
                         + " | ".join(texts) + " |")
    return lines


def _quality_cell(row: dict | None, reference: str) -> str:
    """A quality row as `mean ± std (n, lr, verdict)`; – for no row, pending if incomplete."""
    if row is None:
        return "–"
    if not row["complete"]:
        return "pending"
    verdict = {True: ", within", False: ", below", None: ""}[
        row["within_reference_spread"] if row["recipe"] != reference else None]
    return (f"{100 * row['mean']:.2f} ± {100 * row['std']:.2f} "
            f"(n={len(row['scores'])}, lr {row['learning_rate']:g}{verdict})")


def plot(results: dict, plots_dir: str) -> None:
    """Held-out accuracy against training FLOPs and (with a timing run) wall time, as PNGs.

    Args:
      results: `build`'s results.
      plots_dir: where the PNG files go.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(plots_dir, exist_ok=True)
    target = results["target"]
    axes_of = [("flops", 1e15, "training PFLOPs", "accuracy_vs_flops.png")]
    if results["timing"]:
        axes_of.append(("seconds", 3600, "wall time (h, measured time per step)",
                        "accuracy_vs_wall_time.png"))
    # More recipes than the default cycle's 10 colours: one colour each from tab20.
    colours = plt.get_cmap("tab20").colors
    for key, scale, label, name in axes_of:
        fig, ax = plt.subplots(figsize=(11, 5))
        for i, r in enumerate(results["recipes"]):
            points = [p for p in r["curve"] if p[key] is not None]
            if points:
                ax.plot([p[key] / scale for p in points], [100 * p["value"] for p in points],
                        "-", label=r["label"] or r["name"], linewidth=1.2,
                        color=colours[i % len(colours)])
        if target["value"] is not None:
            ax.axhline(100 * target["value"], color="black", linestyle="--", linewidth=0.8,
                       label=f"target {100 * target['value']:.2f} %")
        ax.set_xlabel(label)
        ax.set_ylabel(f"held-out {target['metric']} (%)")
        ax.grid(alpha=0.3)
        # Beside the axes, not on them: with a row per recipe it would hide the curves.
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
        fig.tight_layout()
        fig.savefig(os.path.join(plots_dir, name), dpi=110, bbox_inches="tight")
        plt.close(fig)
