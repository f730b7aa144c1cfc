"""Tasks: the math of one replica (model, loss, metrics) for each kind of training.

An experiment config names its task in its top-level `task` key; the task's
module defines the config dataclass for the whole experiment, so loading is
strict for every section.
"""

import importlib

from bert_tf import config as config_lib

TASKS = {
    "pretraining": ("bert_tf.tasks.pretraining", "PretrainingTask"),
    "glue": ("bert_tf.tasks.glue", "GlueTask"),
    "squad": ("bert_tf.tasks.squad", "SquadTask"),
    "ner": ("bert_tf.tasks.ner", "NerTask"),
    "swag": ("bert_tf.tasks.swag", "SwagTask"),
}


def task_class(name):
    """The task class registered under `name`."""
    if name not in TASKS:
        raise config_lib.ConfigError(f"unknown task {name!r}; expected one of {sorted(TASKS)}")
    module, attribute = TASKS[name]
    return getattr(importlib.import_module(module), attribute)


def load_experiment(path, overrides=()):
    """(task class, resolved experiment config) from a YAML file plus `a.b=c` overrides."""
    values = config_lib.load_yaml(path)
    if not isinstance(values, dict):
        raise config_lib.ConfigError(f"{path}: expected a mapping at the top level")
    name = values.get("task")
    if name is None:
        raise config_lib.ConfigError(f"{path}: missing the top-level key 'task' "
                                     f"(one of {sorted(TASKS)})")
    cls = task_class(name)
    experiment = config_lib.load_config(cls.config_class, path, overrides)
    if experiment.task != name:
        raise config_lib.ConfigError(f"--set cannot change the task ({name!r} in {path})")
    return cls, experiment
