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


@dataclasses.dataclass
class PhaseSpec:
    """One training run of a recipe: a config plus overrides."""

    name: str = "main"
    config: str = ""
    overrides: list[str] = dataclasses.field(default_factory=list)


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
            raise config_lib.ConfigError(f"{source}: recipes need distinct non-empty names, "
                                         f"got {names}")
        if self.reference_recipe not in names:
            raise config_lib.ConfigError(f"{source}: reference_recipe {self.reference_recipe!r} "
                                         f"is not a recipe ({names})")
        if self.target.value is None and not self.target.from_record:
            raise config_lib.ConfigError(f"{source}: target needs a value or from_record")
        for recipe in self.recipes:
            where = f"{source}: recipe {recipe.name!r}"
            if recipe.eval_every < 1:
                raise config_lib.ConfigError(f"{where}: eval_every must be >= 1, got "
                                             f"{recipe.eval_every}")
            phases = [phase.name for phase in recipe.phases]
            if not phases or len(set(phases)) != len(phases):
                raise config_lib.ConfigError(f"{where}: phases need distinct names, got {phases}")
            for phase in recipe.phases:
                if not phase.config:
                    raise config_lib.ConfigError(f"{where}: phase {phase.name!r} has no config")
        unknown = [name for name in self.quality.recipes if name not in names]
        if unknown:
            raise config_lib.ConfigError(f"{source}: quality.recipes {unknown} are not recipes "
                                         f"({names})")
        if not self.quality.tasks:
            raise config_lib.ConfigError(f"{source}: quality.tasks is empty")
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
        every = self.recipe(self.reference_recipe).eval_every
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
