"""The time-to-train benchmark as data (research/configs/time_to_train.yaml).

A recipe is a pretraining config (a file of research/configs/time_to_train/
or the study's own BERT-mini) trained in one or more phases; a later phase
starts from the weights of the one before (`--init_checkpoint`, fresh
optimizer and schedule, as the BERT paper's length-512 phase does). Every
recipe is scored by the same held-out measurement (`eval_overrides`: the
baseline's batches, length and masking rate, whatever the recipe trains at),
every `eval_every` of its steps, and stops once the target is reached (or,
with `train_to_budget`, trains every phase to its end).

A profile (`profiles: {ci: {...}}`) is merged over the file's top level
(mappings key by key, lists replaced), as for the other studies.
"""

import dataclasses
import os

from bert_tf import config as config_lib
from research.studies import spec as study_spec

KIND = "time_to_train"


@dataclasses.dataclass
class TargetSpec:
    """The held-out metric to reach and its value."""

    metric: str = "mlm_accuracy"
    # The target value; None: the final evaluation in `from_record` (a run's eval_results.json).
    value: float | None = None
    # Relative to the repository root.
    from_record: str = ""
    # True: the mean over the reference recipe's runs (its `seeds`) of their final
    # evaluation; the reference trains to its budget, and the target is known once every
    # one of its runs has finished.
    from_reference: bool = False


@dataclasses.dataclass
class PhaseSpec:
    """One training run of a recipe: a config plus overrides."""

    name: str = "main"
    config: str = ""
    overrides: list[str] = dataclasses.field(default_factory=list)
    # In a recipe with `wall_fraction`: this phase's steps are what the wall time left
    # after the other phases buys (its learning rate decays to 0 at its last step).
    fill_budget: bool = False


@dataclasses.dataclass
class RecipeSpec:
    """A row of the benchmark: phases run in order until the target is reached."""

    name: str = ""
    label: str = ""
    # Steps between held-out evaluations (also the checkpoint and loop interval).
    eval_every: int = 20
    phases: list[PhaseSpec] = dataclasses.field(default_factory=list)
    # True: every phase trains to its last step instead of stopping at the target. The row
    # still reports its first crossing; its quality is measured on the model it ends with
    # (a recipe sized to a compute budget, judged on what that budget delivers).
    train_to_budget: bool = False
    # Pretraining replicates: each seed sets runtime.seed and data.seed (initial weights,
    # data order, pairs and masks) and becomes a row `<name>_seed<seed>` of its own,
    # `replicate_of` this recipe (set when the file is read). Empty: one run.
    seeds: list[int] = dataclasses.field(default_factory=list)
    replicate_of: str = ""
    # > 0: trained to this fraction of the reference's mean wall time to the target, the
    # steps of its `fill_budget` phase fixed from the timing run and the reference's runs
    # (`runner.Benchmark.fill_budget_steps`) when it first trains. Needs train_to_budget.
    wall_fraction: float = 0.0

    @property
    def group(self) -> str:
        """The recipe its replicates share (its own name when it has none)."""
        return self.replicate_of or self.name


@dataclasses.dataclass
class TimingSpec:
    """The short run that measures every recipe's time per step on one machine."""

    # Steps per phase; the first loop (tracing, pipeline warm-up) is not timed.
    steps: int = 40
    steps_per_loop: int = 10


@dataclasses.dataclass
class ExtendedGridSpec:
    """Learning rates tried on one task beyond the study's grid."""

    task: str = ""
    learning_rates: list[float] = dataclasses.field(default_factory=list)
    # The fine-tuned recipes tuned on it; empty: all of them.
    recipes: list[str] = dataclasses.field(default_factory=list)
    # Recipes tuned on `every_seed_rates` (rates of this grid) with every seed, not only on
    # the chosen rate: whether a verdict hangs on the rate the first seed happened to pick.
    every_seed_for: list[str] = dataclasses.field(default_factory=list)
    every_seed_rates: list[float] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class TaskRateSpec:
    """A learning rate fixed in advance for one task: no grid, no selection."""

    task: str = ""
    learning_rate: float = 0.0


@dataclasses.dataclass
class VerdictSpec:
    """The pre-registered verdict (`research.studies.time_to_train.verdict`)."""

    # The largest loss (points) allowed at the lower bound of any task's interval.
    margin: float = 1.0
    confidence: float = 0.90
    resamples: int = 10000
    seed: int = 0


@dataclasses.dataclass
class QualitySpec:
    """Fine-tuning at the target (`research.studies.time_to_train.quality`)."""

    # The study (research/configs/<study>.yaml) whose suite fine-tunes: grid, seeds, overrides.
    study: str = "pretrain_vs_random"
    study_profile: str = "full"
    # Names of that suite's tasks to fine-tune on.
    tasks: list[str] = dataclasses.field(default_factory=lambda: ["stsb", "mrpc", "rte"])
    # Recipes fine-tuned besides the reference and the fastest one.
    recipes: list[str] = dataclasses.field(default_factory=list)
    # The reference recipe's checkpoints at these steps, kept while it trains and fine-tuned
    # like the crossings: the reference at a fast recipe's step count tells whether that
    # recipe's downstream gap comes from its changes or from its fewer updates. Each must be
    # a multiple of the reference's eval_every (checkpoints are written at evaluations).
    reference_steps: list[int] = dataclasses.field(default_factory=list)
    # The tasks (of `tasks`) those checkpoints are fine-tuned on; empty: all of `tasks`.
    reference_steps_tasks: list[str] = dataclasses.field(default_factory=list)
    # The benchmark's goal: the reference's quality (every task of `tasks` within its seed
    # spread or above) in at most this fraction of the reference's wall time to the target.
    # A train_to_budget recipe is charged its whole budget, not only its way to the crossing.
    goal_wall_fraction: float = 0.5
    # Where a task's best rate sits at the edge of the study's grid the grid has not found
    # the optimum: these tasks are fine-tuned again over the study's grid plus these rates
    # (the study's runs are reused), and reported, and judged, beside the study's grid.
    extended_grids: list[ExtendedGridSpec] = dataclasses.field(default_factory=list)
    # Tasks fine-tuned at one rate fixed in advance (every seed at it), not over the grid.
    learning_rates: list[TaskRateSpec] = dataclasses.field(default_factory=list)
    # Fine-tuning seeds; empty: the study's.
    seeds: list[int] = dataclasses.field(default_factory=list)
    # Set: every fine-tuned recipe is judged against the reference by the hierarchical
    # bootstrap (replicates pooled per recipe), beside the goal.
    verdict: VerdictSpec | None = None


@dataclasses.dataclass
class TimeToTrainSpec:
    """The whole benchmark."""

    kind: str = KIND
    name: str = ""
    description: str = ""
    corpus: study_spec.CorpusSpec = dataclasses.field(default_factory=study_spec.CorpusSpec)
    vocab_file: str = "vocab/bert-base-uncased-vocab.txt"
    lower_case: bool = True
    target: TargetSpec = dataclasses.field(default_factory=TargetSpec)
    # Applied to every phase before its own overrides (profiles shrink runs with it).
    overrides: list[str] = dataclasses.field(default_factory=list)
    # Applied to every phase last: the held-out measurement.
    eval_overrides: list[str] = dataclasses.field(default_factory=list)
    # The recipe every speed-up is relative to.
    reference_recipe: str = "baseline"
    recipes: list[RecipeSpec] = dataclasses.field(default_factory=list)
    timing: TimingSpec = dataclasses.field(default_factory=TimingSpec)
    quality: QualitySpec = dataclasses.field(default_factory=QualitySpec)
    profiles: dict = dataclasses.field(default_factory=dict)

    def recipe(self, name: str) -> RecipeSpec:
        return next(recipe for recipe in self.recipes if recipe.name == name)

    def replicates(self, group: str) -> list[RecipeSpec]:
        """The rows of recipe `group`: its replicates, or the recipe itself."""
        return [recipe for recipe in self.recipes if recipe.group == group]

    def reference_rows(self) -> list[RecipeSpec]:
        """The reference recipe's rows (its replicates, or itself)."""
        return self.replicates(self.reference_recipe)

    def reference_row(self) -> RecipeSpec:
        """The row the per-row comparisons (speed-ups, held-out batches) are against: the
        reference recipe, or its first replicate."""
        return self.reference_rows()[0]

    def expand_replicates(self) -> None:
        """Replaces every recipe with `seeds` by one row per seed (see `RecipeSpec.seeds`)."""
        expanded = []
        for recipe in self.recipes:
            if not recipe.seeds:
                expanded.append(recipe)
                continue
            for seed in recipe.seeds:
                seeded = [f"runtime.seed={seed}", f"data.seed={seed}"]
                expanded.append(dataclasses.replace(
                    recipe, name=f"{recipe.name}_seed{seed}",
                    label=f"{recipe.label or recipe.name} (seed {seed})", seeds=[],
                    replicate_of=recipe.name,
                    phases=[dataclasses.replace(phase, overrides=[*phase.overrides, *seeded])
                            for phase in recipe.phases]))
        self.recipes = expanded

    def reference_step_arms(self) -> dict[str, int]:
        """`{arm name: step}` of `quality.reference_steps`: `<reference>_step<step>`."""
        return {f"{self.reference_recipe}_step{step}": step
                for step in self.quality.reference_steps}

    def validate(self, source: str) -> None:
        """Cross-field checks, each error naming the file and the key."""
        if not self.name:
            raise config_lib.ConfigError(f"{source}: name is empty")
        names = [recipe.name for recipe in self.recipes]
        if not names or "" in names or len(set(names)) != len(names):
            raise config_lib.ConfigError(f"{source}: recipes need distinct non-empty names "
                                         f"(replicates: <name>_seed<seed>), got {names}")
        groups = list(dict.fromkeys(recipe.group for recipe in self.recipes))
        if self.reference_recipe not in groups:
            raise config_lib.ConfigError(f"{source}: reference_recipe {self.reference_recipe!r} "
                                         f"is not a recipe ({groups})")
        if self.target.value is None and not self.target.from_record \
                and not self.target.from_reference:
            raise config_lib.ConfigError(f"{source}: target needs a value or from_record (or "
                                         "from_reference: true)")
        reference_rows = self.reference_rows()
        if self.target.from_reference and not all(r.train_to_budget for r in reference_rows):
            raise config_lib.ConfigError(f"{source}: target.from_reference needs the reference "
                                         f"recipe {self.reference_recipe!r} trained to its "
                                         "budget (train_to_budget: true)")
        for recipe in self.recipes:
            where = f"{source}: recipe {recipe.name!r}"
            filling = [phase.name for phase in recipe.phases if phase.fill_budget]
            if recipe.wall_fraction:
                if not 0 < recipe.wall_fraction <= 1 or not recipe.train_to_budget \
                        or len(filling) != 1 or recipe.group == self.reference_recipe:
                    raise config_lib.ConfigError(
                        f"{where}: wall_fraction ({recipe.wall_fraction}) must be in (0, 1], "
                        "on a recipe other than the reference, with train_to_budget: true and "
                        f"exactly one phase with fill_budget (got {filling})")
            elif filling:
                raise config_lib.ConfigError(f"{where}: phases {filling} have fill_budget but "
                                             "the recipe has no wall_fraction")
            if recipe.eval_every < 1:
                raise config_lib.ConfigError(f"{where}: eval_every must be >= 1, got "
                                             f"{recipe.eval_every}")
            phases = [phase.name for phase in recipe.phases]
            if not phases or len(set(phases)) != len(phases):
                raise config_lib.ConfigError(f"{where}: phases need distinct names, got {phases}")
            for phase in recipe.phases:
                if not phase.config:
                    raise config_lib.ConfigError(f"{where}: phase {phase.name!r} has no config")
        unknown = [name for name in self.quality.recipes if name not in names + groups]
        if unknown:
            raise config_lib.ConfigError(f"{source}: quality.recipes {unknown} are not recipes "
                                         f"({groups})")
        if not self.quality.tasks:
            raise config_lib.ConfigError(f"{source}: quality.tasks is empty")
        fixed = [rate.task for rate in self.quality.learning_rates]
        strangers = [task for task in fixed if task not in self.quality.tasks]
        if strangers or len(set(fixed)) != len(fixed) or any(
                rate.learning_rate <= 0 for rate in self.quality.learning_rates):
            raise config_lib.ConfigError(f"{source}: quality.learning_rates must give distinct "
                                         f"tasks of quality.tasks {self.quality.tasks} a "
                                         f"positive rate each, got {fixed}")
        if len(set(self.quality.seeds)) != len(self.quality.seeds):
            raise config_lib.ConfigError(f"{source}: quality.seeds must be distinct, got "
                                         f"{self.quality.seeds}")
        verdict = self.quality.verdict
        if verdict is not None and (verdict.margin < 0 or verdict.resamples < 1
                                    or not 0 < verdict.confidence < 1):
            raise config_lib.ConfigError(f"{source}: quality.verdict needs margin >= 0, "
                                         f"resamples >= 1 and confidence in (0, 1), got "
                                         f"{verdict}")
        for grid in self.quality.extended_grids:
            if grid.task not in self.quality.tasks:
                raise config_lib.ConfigError(f"{source}: quality.extended_grids task "
                                             f"{grid.task!r} is not in quality.tasks "
                                             f"{self.quality.tasks}")
            if not grid.learning_rates or any(lr <= 0 for lr in grid.learning_rates):
                raise config_lib.ConfigError(f"{source}: quality.extended_grids "
                                             f"{grid.task!r}: learning_rates must be positive "
                                             f"and not empty, got {grid.learning_rates}")
            for key in ("recipes", "every_seed_for"):
                strangers = [name for name in getattr(grid, key) if name not in names]
                if strangers:
                    raise config_lib.ConfigError(f"{source}: quality.extended_grids "
                                                 f"{grid.task!r}: {key} {strangers} are not "
                                                 f"recipes ({names})")
            outside = [name for name in grid.every_seed_for
                       if grid.recipes and name not in grid.recipes]
            if outside:
                raise config_lib.ConfigError(f"{source}: quality.extended_grids "
                                             f"{grid.task!r}: every_seed_for {outside} are not "
                                             f"in its recipes {grid.recipes}")
            if bool(grid.every_seed_for) != bool(grid.every_seed_rates):
                raise config_lib.ConfigError(f"{source}: quality.extended_grids "
                                             f"{grid.task!r}: every_seed_for and "
                                             "every_seed_rates go together")
        if not 0 < self.quality.goal_wall_fraction <= 1:
            raise config_lib.ConfigError(f"{source}: quality.goal_wall_fraction must be in "
                                         f"(0, 1], got {self.quality.goal_wall_fraction}")
        every = self.reference_row().eval_every
        off_grid = [step for step in self.quality.reference_steps
                    if step < 1 or step % every]
        if off_grid:
            raise config_lib.ConfigError(
                f"{source}: quality.reference_steps {off_grid} are not positive multiples of "
                f"the reference recipe's eval_every ({every}): no checkpoint is written there")
        clashes = [arm for arm in self.reference_step_arms() if arm in names]
        if clashes:
            raise config_lib.ConfigError(f"{source}: recipes {clashes} have the names of "
                                         "quality.reference_steps' fine-tuning arms")
        strangers = [task for task in self.quality.reference_steps_tasks
                     if task not in self.quality.tasks]
        if strangers:
            raise config_lib.ConfigError(f"{source}: quality.reference_steps_tasks {strangers} "
                                         f"are not in quality.tasks {self.quality.tasks}")
        if self.timing.steps <= self.timing.steps_per_loop or self.timing.steps_per_loop < 1:
            raise config_lib.ConfigError(f"{source}: timing.steps ({self.timing.steps}) must "
                                         f"exceed timing.steps_per_loop "
                                         f"({self.timing.steps_per_loop}) >= 1: the first loop "
                                         "is not timed")


def is_time_to_train(name: str) -> bool:
    """Whether study `name` (a name in research/configs/ or a path) is this benchmark."""
    path = study_spec.study_path(name)
    return os.path.isfile(path) and config_lib.load_yaml(path).get("kind") == KIND


def load(name: str, profile: str = "full") -> TimeToTrainSpec:
    """The `TimeToTrainSpec` of `name` under `profile`.

    Args:
      name: a study in research/configs/ or a path to its YAML.
      profile: "full" (the file as written) or a key of its `profiles`.

    Raises:
      bert_tf.config.ConfigError: unknown keys, wrong types, an unknown profile
        or inconsistent recipes (the message names the file and key).
    """
    path = study_spec.study_path(name)
    values = config_lib.load_yaml(path)
    if profile != "full":
        profiles = values.get("profiles") or {}
        if profile not in profiles:
            raise config_lib.ConfigError(f"{path}: no profile {profile!r}; profiles: "
                                         f"{['full', *sorted(profiles)]}")
        values = study_spec.merge_profile(values, profiles[profile])
    spec = config_lib.from_dict(TimeToTrainSpec, values, source=path)
    spec.expand_replicates()
    spec.validate(path)
    return spec


def target_value(spec: TimeToTrainSpec) -> float:
    """The target: `target.value`, else the final `target.metric` of `target.from_record`.

    Args:
      spec: the benchmark.

    Raises:
      bert_tf.config.ConfigError: the record lacks the metric.
      FileNotFoundError: the record does not exist.
    """
    if spec.target.value is not None:
        return spec.target.value
    path = study_spec.resolve_repo_path(spec.target.from_record)
    values = config_lib.load_yaml(path)  # JSON is YAML
    try:
        return float(values["metrics"][spec.target.metric])
    except (KeyError, TypeError) as e:
        raise config_lib.ConfigError(f"{path}: no metrics.{spec.target.metric} (target."
                                     "from_record)") from e
