"""Quality at the target: the reference and the fastest recipe, fine-tuned.

A recipe that reaches the MLM target sooner but fine-tunes worse has not won.
Each chosen recipe's checkpoint at its crossing evaluation (`ckpt-<step>` of
the phase that reached the target: checkpoints are written at every
evaluation), or for a recipe with `train_to_budget` its last checkpoint (the
model its budget delivers), is fine-tuned on `quality.tasks` of the study
`quality.study`, with that study's learning-rate grid, seeds and overrides. The study harness
(`research.studies.runner.Study`) runs them: every rate on the first seed, the
best rate on the other seeds, each run resumable.

Chosen recipes: the reference, the fastest recipe that reached the target
(least wall time when every reached recipe is timed, else least training
FLOPs) and any named in `quality.recipes`.

Besides, the reference's checkpoints at `quality.reference_steps` (kept while
it trained, `runner.keep_checkpoint`) are fine-tuned the same way on
`quality.reference_steps_tasks`, each as an arm `<reference>_step<step>`: the
reference at a fast recipe's step count separates what the fast recipe's
changes cost downstream from what its fewer updates cost.

With `quality.extended_grids`, each chosen recipe (those of a grid's `recipes` when it
lists some) is also tuned on the grid's task over the study's grid plus the extra rates:
the same runs where the rates overlap, and a second cell (`grid: "extended"`) beside the
study's (`grid: "study"`). The recipes of a grid's `every_seed_for` also run its
`every_seed_rates` on every seed (the cell's `every_seed` runs; empty for the others).

With `quality.learning_rates`, those tasks run at one rate fixed in advance (every seed at
it, no selection), and `quality.seeds` replaces the study's seeds. A recipe with replicates
(`seeds`) is fine-tuned run by run, each replicate an arm of its own.

Layout: `<out>/quality/finetune/<recipe or arm>/<task>/lr<rate>_seed<seed>/`.
"""

import dataclasses
import functools
import os
import statistics

from bert_tf import config as config_lib
from research.studies import runner as study_runner
from research.studies import spec as study_spec
from research.studies.time_to_train import runner as ttt_runner

QUALITY_DIR = "quality"
# The grid a quality cell was tuned over.
STUDY_GRID = "study"
EXTENDED_GRID = "extended"


def fastest_reached(results: dict) -> str | None:
    """The reached recipe with the least wall time (all timed), else the least FLOPs.

    Args:
      results: the benchmark's results (`report.build`).
    """
    reached = [r for r in results["recipes"] if r["status"] == "reached"]
    if not reached:
        return None
    key = ("seconds_to_target" if all(r["seconds_to_target"] is not None for r in reached)
           else "flops_to_target")
    return min(reached, key=lambda r: r[key])["name"]


def chosen_recipes(benchmark, results: dict) -> list[str]:
    """The reference, the fastest reached recipe and `quality.recipes`, each once, reached only.

    Args:
      benchmark: a `runner.Benchmark`.
      results: its results (`report.build`).
    """
    spec = benchmark.spec
    statuses = {r["name"]: r["status"] for r in results["recipes"]}
    names = [spec.reference_recipe, fastest_reached(results), *spec.quality.recipes]
    # A name with replicates stands for all of them.
    rows = [row.name for name in names if name
            for row in (spec.replicates(name) or [spec.recipe(name)])]
    chosen = []
    for name in rows:
        # A recipe sized to a wall-time budget is judged on what that budget delivers, and
        # every run of a reference whose runs set the target is the bar, whether or not
        # it crossed the MLM target.
        recipe = spec.recipe(name)
        either = recipe.wall_fraction or (recipe.group == spec.reference_recipe
                                          and spec.target.from_reference)
        finished = ("reached", "budget") if either else ("reached",)
        if statuses.get(name) in finished and name not in chosen:
            chosen.append(name)
    return chosen


def quality_checkpoint(benchmark, recipe_name: str) -> str:
    """The checkpoint prefix of a recipe at its first evaluation at or above the target,
    or for a `train_to_budget` recipe, at the last step of its last phase.

    Raises:
      FileNotFoundError: the recipe has not reached the target (or, trained to its budget,
        not finished), or that checkpoint is gone.
    """
    recipe = benchmark.spec.recipe(recipe_name)
    if recipe.train_to_budget:
        return _last_checkpoint(benchmark, recipe)
    for phase in recipe.phases:
        model_dir = benchmark.phase_dir(recipe, phase)
        curve = benchmark.eval_curve(model_dir)
        index = ttt_runner.first_crossing(curve, benchmark.target)
        if index is not None:
            prefix = os.path.join(model_dir, f"ckpt-{curve[index][0]}")
            if not os.path.isfile(prefix + ".index"):
                raise FileNotFoundError(f"recipe {recipe_name!r} reached the target at step "
                                        f"{curve[index][0]} of {model_dir}, but {prefix}.index "
                                        "is gone: its fine-tuning needs that checkpoint")
            return prefix
    raise FileNotFoundError(f"recipe {recipe_name!r} has not reached the target: nothing to "
                            "fine-tune")


def reference_step_checkpoint(benchmark, step: int) -> str:
    """The prefix of the reference recipe's checkpoint kept at `step`.

    Raises:
      FileNotFoundError: no phase of the reference kept a checkpoint at `step`.
    """
    recipe = benchmark.spec.reference_row()
    for phase in recipe.phases:
        prefix = ttt_runner.kept_checkpoint(benchmark.phase_dir(recipe, phase), step)
        if os.path.isfile(prefix + ".index"):
            return prefix
    raise FileNotFoundError(
        f"no checkpoint of recipe {recipe.name!r} is kept at step {step} "
        f"(quality.reference_steps): it is copied into {ttt_runner.KEPT_DIR}/ when the "
        "recipe's training passes that step, so a run not there yet, or trained before the "
        "step was listed, has none")


def _last_checkpoint(benchmark, recipe) -> str:
    phase = recipe.phases[-1]
    if benchmark.phase_state(recipe, phase) == "open":
        raise FileNotFoundError(f"recipe {recipe.name!r} has not trained phase {phase.name!r} "
                                "to its last step: nothing to fine-tune yet")
    last_step = benchmark.experiment(recipe, phase).trainer.train_steps
    prefix = os.path.join(benchmark.phase_dir(recipe, phase), f"ckpt-{last_step}")
    if not os.path.isfile(prefix + ".index"):
        raise FileNotFoundError(f"{prefix}.index is gone: recipe {recipe.name!r}'s fine-tuning "
                                "needs its last checkpoint")
    return prefix


class QualityStudy(study_runner.Study):
    """The study harness: an arm per chosen recipe, initialised from `quality_checkpoint`, and an
    arm per `quality.reference_steps`, from the reference's checkpoint kept there.

    Args:
      benchmark: a `runner.Benchmark`.
      recipes: the recipes to fine-tune (`chosen_recipes`).
      step_arms: whether the reference's step arms are among the arms (False: `recipes` only,
        as one run's unit of `run_units` fine-tunes).
    """

    def __init__(self, benchmark, recipes: list[str], step_arms: bool = True):
        quality = benchmark.spec.quality
        # Arm name -> a function returning its init checkpoint (raising when it is gone).
        self._checkpoints = {name: functools.partial(quality_checkpoint, benchmark, name)
                             for name in recipes}
        steps = benchmark.spec.reference_step_arms() if step_arms else {}
        step_arm_specs = []
        for name, step in steps.items():
            self._checkpoints[name] = functools.partial(reference_step_checkpoint, benchmark,
                                                        step)
            step_arm_specs.append(study_spec.ArmSpec(name=name, init=f"pretrained:{name}",
                                                     tasks=list(quality.reference_steps_tasks)))
        profile = quality.study_profile
        study = study_spec.load_study(quality.study, profile)
        missing = sorted(set(quality.tasks) - {task.name for task in study.suite.tasks})
        if missing:
            raise config_lib.ConfigError(f"quality.tasks {missing} are not tasks of study "
                                         f"{quality.study!r} (profile {profile})")
        # Rates fixed in advance replace a task's grid: every seed runs at that one rate.
        fixed = {rate.task: rate.learning_rate for rate in quality.learning_rates}
        suite = dataclasses.replace(
            study.suite, seeds=list(quality.seeds or study.suite.seeds),
            tasks=[dataclasses.replace(task, learning_rates=[fixed[task.name]])
                   if task.name in fixed else task
                   for task in study.suite.tasks if task.name in quality.tasks])
        spec = dataclasses.replace(
            study, name=f"{benchmark.spec.name}_quality",
            pretraining=[study_spec.RunSpec(name=name) for name in self._checkpoints],
            pretraining_overrides=[], reference_arms=[], tables=[], suite=suite,
            arms=[*(study_spec.ArmSpec(name=name, init=f"pretrained:{name}")
                    for name in recipes), *step_arm_specs])
        super().__init__(spec, os.path.join(benchmark.out_dir, QUALITY_DIR), profile,
                         benchmark.log)
        self.benchmark = benchmark
        self._recipes = list(recipes)
        # Task name -> that task with the study's grid plus the extra rates, highest first
        # (as the study lists its own: ties go to the higher rate).
        self._grids = {grid.task: grid for grid in quality.extended_grids}
        self._extended_tasks = {
            task.name: dataclasses.replace(task, learning_rates=sorted(
                {*self._grids[task.name].learning_rates, *suite.learning_rates_of(task)},
                reverse=True))
            for task in suite.tasks if task.name in self._grids}

    def _arm_init(self, arm):
        return self._checkpoints[arm.name](), []

    def _require_pretrained_weights(self, arm):
        self._checkpoints[arm.name]()  # raises when it is gone

    def cells(self, execute: bool) -> list[dict]:
        """Every (recipe, task, grid) cell's record (`Study.run_suite_cell` with its `grid`);
        trains when `execute`. The reference's step arms are tuned on the study's grid only.
        """
        cells = []
        for arm in self.spec.arms:
            for task in self.spec.arm_tasks(arm):
                cells.append({**self.run_suite_cell(arm, task, execute=execute),
                              "grid": STUDY_GRID, "every_seed": []})
                extended = self._extended_tasks.get(task.name)
                grid = self._grids.get(task.name)
                if (extended is not None and arm.name in self._recipes
                        and (not grid.recipes or arm.name in grid.recipes)):
                    cell = self.run_suite_cell(arm, extended, execute=execute)
                    every_seed = (self._every_seed_runs(arm, extended, grid.every_seed_rates,
                                                        execute)
                                  if arm.name in grid.every_seed_for else [])
                    cells.append({**cell, "grid": EXTENDED_GRID, "every_seed": every_seed})
        return cells

    def _every_seed_runs(self, arm, task, rates: list[float], execute: bool) -> list[dict]:
        """The finished runs of `rates` on every seed (the selection's own among them);
        trains the others when `execute`."""
        runs = (self.suite_run(arm, task, learning_rate, seed, execute)
                for learning_rate in rates for seed in self.spec.suite.seeds)
        return [run for run in runs if run is not None]


def recipes_to_show(benchmark, results: dict) -> list[str]:
    """The chosen recipes, then any other recipe already fine-tuned (an earlier fastest)."""
    shown = chosen_recipes(benchmark, results)
    finetuned = os.path.join(benchmark.out_dir, QUALITY_DIR, "finetune")
    if os.path.isdir(finetuned):
        shown += [r["name"] for r in results["recipes"]
                  if r["name"] not in shown and r["status"] == "reached"
                  and os.path.isdir(os.path.join(finetuned, r["name"]))]
    return shown


def _by_rate(runs: list[dict], metric: str) -> list[dict]:
    """Runs grouped by learning rate, highest first: the seeds' scores, mean and deviation."""
    rows = []
    for rate in sorted({run["learning_rate"] for run in runs}, reverse=True):
        scores = [run["metrics"][metric] for run in runs if run["learning_rate"] == rate]
        rows.append({"learning_rate": rate, "scores": scores, "mean": statistics.fmean(scores),
                     "std": statistics.stdev(scores) if len(scores) > 1 else 0.0})
    return rows


def summarize(cells: list[dict], reference: str) -> list[dict]:
    """Per recipe, task and grid: the chosen rate, the seeds' scores, mean and standard
    deviation (and the same per rate of the `every_seed` runs), and for complete cells
    whether the mean is within the reference's spread or above it (at least the
    reference's mean minus its standard deviation, on the same grid).

    Args:
      cells: `QualityStudy.cells`.
      reference: the reference recipe's name.
    """
    rows = []
    for cell in cells:
        chosen = cell["chosen_learning_rate"]
        scores = [run["metrics"][cell["main_metric"]] for run in cell["runs"]
                  if run["learning_rate"] == chosen]
        rows.append({"recipe": cell["arm"], "task": cell["task"],
                     "grid": cell["grid"], "main_metric": cell["main_metric"],
                     "complete": cell["complete"],
                     "learning_rate": chosen, "scores": scores,
                     "mean": statistics.fmean(scores) if cell["complete"] else None,
                     "std": statistics.stdev(scores) if cell["complete"] and len(scores) > 1
                     else (0.0 if cell["complete"] else None),
                     "every_seed": _by_rate(cell["every_seed"], cell["main_metric"])})
    by_key = {(row["recipe"], row["task"], row["grid"]): row for row in rows}
    for row in rows:
        base = by_key.get((reference, row["task"], row["grid"]))
        row["within_reference_spread"] = (
            None if row["mean"] is None or base is None or base["mean"] is None
            else row["mean"] >= base["mean"] - base["std"])
    return rows
