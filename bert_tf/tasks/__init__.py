"""Tasks: the math of one replica (model, loss, metrics) for each kind of training.

Every task implements `bert_tf.tasks.base.Task`. An experiment config names
its task in its top-level `task` key, which this registry maps to the task
class; the task's module defines the config dataclass for the whole
experiment, so loading is strict for every section. The built-in tasks are
imported when first named; `register_task` adds another.
"""

from __future__ import annotations

import dataclasses

from bert_tf import config as config_lib
from bert_tf import packaged_configs
from bert_tf.registry import Registry
from bert_tf.training import resolution


def _check_task_class(task_class) -> None:
    """Refuses a task class without a name or an experiment dataclass to match.

    Raises:
      TypeError: no name, or no experiment dataclass.
      ValueError: the config's `task` default differs from the name.
    """
    name = getattr(task_class, "name", None)
    config_class = getattr(task_class, "config_class", None)
    if not isinstance(name, str) or not name:
        raise TypeError(f"{task_class.__name__}.name must be a non-empty string, got {name!r}")
    if not dataclasses.is_dataclass(config_class):
        raise TypeError(f"{task_class.__name__}.config_class must be an experiment "
                        f"dataclass, got {config_class!r}")
    fields = {field.name: field for field in dataclasses.fields(config_class)}
    if "task" not in fields or fields["task"].default != name:
        raise ValueError(f"{config_class.__name__}.task must default to {name!r}, the "
                         f"task's name")


# Task name -> task class. The base class is named by its path: importing it
# (and TensorFlow) waits until a task is registered or looked up.
TASKS: Registry[type] = Registry("task", "bert_tf.tasks.base.Task", classes=True,
                                 validate=_check_task_class)
for _name, _path in (("pretraining", "bert_tf.tasks.pretraining.PretrainingTask"),
                     ("glue", "bert_tf.tasks.glue.GlueTask"),
                     ("squad", "bert_tf.tasks.squad.SquadTask"),
                     ("ner", "bert_tf.tasks.ner.NerTask"),
                     ("ner_features", "bert_tf.tasks.ner_features.NerFeaturesTask"),
                     ("swag", "bert_tf.tasks.swag.SwagTask")):
    TASKS.add_lazy(_name, _path)
del _name, _path


def register_task(task_class: type) -> type:
    """Registers `task_class` under its `name`, so experiment configs can name it.

    Args:
      task_class: a concrete subclass of `bert_tf.tasks.base.Task` whose
        `config_class` is a dataclass with a `task` field defaulting to `name`.

    Returns:
      `task_class` (so this works as a class decorator).

    Raises:
      TypeError: not a `Task` subclass, or no experiment dataclass.
      ValueError: the name is taken, or the config's `task` default differs.
    """
    return TASKS.add(task_class)


def task_class(name: str) -> type:
    """The task class registered under `name` (a built-in one is imported now).

    Raises:
      ConfigError: no task of that name.
    """
    if name not in TASKS:
        raise config_lib.ConfigError(f"unknown task {name!r}{config_lib.nearest(name, TASKS)}; "
                                     f"expected one of {sorted(TASKS)}")
    return TASKS.lookup(name)


def load_experiment(path: str, overrides=(), recorded: bool = False):
    """(task class, experiment config) from a YAML file plus `a.b=c` overrides.

    A `trainer.train_steps` the overrides set replaces the file's epochs
    (`resolution.explicit_steps_win`); the trainer resolves the rest before
    it builds anything (`resolution.resolve_run`).

    Args:
      path: a YAML file or a packaged preset name (`finetune/glue_mrpc`).
      overrides: `a.b=c` strings applied on top of the file.
      recorded: the file is a run's own params.yaml (perhaps of an earlier
        version: `bert_tf.config.upgrade_recorded`), not a user's config.

    Raises:
      ConfigError: naming the file and key at fault.
      FileNotFoundError: neither a file nor a preset (the message lists the presets).
    """
    path = packaged_configs.resolve(path)
    values = config_lib.load_yaml(path)
    if not isinstance(values, dict):
        raise config_lib.ConfigError(f"{path}: expected a mapping at the top level")
    name = values.get("task")
    if name is None:
        raise config_lib.ConfigError(f"{path}: missing the top-level key 'task' "
                                     f"(one of {sorted(TASKS)})")
    cls = task_class(name)
    experiment = config_lib.load_config(cls.config_class, path, overrides, recorded)
    if experiment.task != name:
        raise config_lib.ConfigError(f"--set cannot change the task ({name!r} in {path})")
    return cls, resolution.explicit_steps_win(experiment, config_lib.override_keys(overrides),
                                              path)
