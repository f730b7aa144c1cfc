"""The run directory's own files: `params.yaml`, `eval_results.json` and the resume check.

    model_dir/params.yaml        the run's final experiment (what a resumed run is checked against)
    model_dir/eval_results.json  the newest evaluation: {"step": N, "metrics": {...}}

Every read and write goes through `bert_tf.storage`, so a run directory may be
on `gs://`; this module imports TensorFlow only for such paths, so sweeps, the
research harness and other readers of local run directories stay light. The
resume check alone reads the checkpoint state with TensorFlow (the trainer
calls it, which has TensorFlow loaded).
"""

from __future__ import annotations

import json
import logging
import os

from bert_tf import config as config_lib
from bert_tf import storage

PARAMS_FILE = "params.yaml"
EVAL_RESULTS_FILE = "eval_results.json"


class IncompatibleRunError(ValueError):
    """`model_dir` holds a run whose model differs from the config."""


def read_params(model_dir: str) -> dict | None:
    """The run's `params.yaml` as a plain mapping, or None before the run wrote it.

    Keys of earlier versions come back as today's (`bert_tf.config.upgrade_recorded`).

    Args:
      model_dir: the run directory.
    """
    path = os.path.join(model_dir, PARAMS_FILE)
    if not storage.isfile(path):
        return None
    # Written by this library, perhaps by an earlier version of it.
    return config_lib.upgrade_recorded(config_lib.load_yaml(path))


def recorded_precision(model_dir: str) -> str | None:
    """The `runtime.mixed_precision` the run's `params.yaml` records, or None.

    Args:
      model_dir: the run directory.
    """
    params = read_params(model_dir)
    return None if params is None else params.get("runtime", {}).get("mixed_precision")


def write_params(model_dir: str, experiment) -> None:
    """Writes `experiment` (the run's final one) to `model_dir/params.yaml`.

    Args:
      model_dir: the run directory (created if missing).
      experiment: an experiment dataclass.
    """
    storage.makedirs(model_dir, exist_ok=True)
    config_lib.dump_config(experiment, os.path.join(model_dir, PARAMS_FILE))


def write_eval_results(model_dir: str, step: int, metrics: dict) -> None:
    """Replaces `model_dir/eval_results.json` by the evaluation of `step` (what sweeps compare).

    Args:
      model_dir: the run directory.
      step: the step the model was evaluated at.
      metrics: `{name: value}` of that evaluation.
    """
    path = os.path.join(model_dir, EVAL_RESULTS_FILE)
    with storage.atomic_write(path, encoding="utf-8") as f:
        json.dump({"step": step, "metrics": metrics}, f, indent=2, sort_keys=True)


def last_evaluation(model_dir: str) -> tuple[int | None, dict]:
    """`(step, metrics)` of the run's newest evaluation, or `(None, {})` before the first.

    Args:
      model_dir: the run directory.
    """
    path = os.path.join(model_dir, EVAL_RESULTS_FILE)
    if not storage.isfile(path):
        return None, {}
    with storage.open(path, encoding="utf-8") as f:
        results = json.load(f)
    return results.get("step"), results.get("metrics", {})


def finished_results(model_dir: str) -> dict | None:
    """The run's final `eval_results.json` when it evaluated its last step, else None.

    Args:
      model_dir: the run directory.
    """
    params = read_params(model_dir)
    path = os.path.join(model_dir, EVAL_RESULTS_FILE)
    if params is None or not storage.isfile(path):
        return None
    with storage.open(path, encoding="utf-8") as f:
        results = json.load(f)
    return results if results["step"] == params["trainer"]["train_steps"] else None


def _listed(differences):
    return "; ".join(f"{key}: {old!r} in the run, {new!r} in this config"
                     for key, (old, new) in differences.items())


def check_resumable(model_dir: str, experiment, task, allow_data_change: bool = False) -> None:
    """Raises `IncompatibleRunError` when `model_dir`'s run cannot resume as `experiment`.

    Args:
      model_dir: the run directory (nothing is checked before its first checkpoint).
      experiment: the resolved experiment about to run.
      task: its `Task`; `model_differences` and `input_differences` say what differs.
      allow_data_change: accept settings that change which training batches come
        next (the resumed run then no longer matches an uninterrupted one).
    """
    from bert_tf.checkpoints import readable  # TensorFlow: the checkpoint state's format

    path = os.path.join(model_dir, PARAMS_FILE)
    if not (storage.exists(path) and readable.listed_checkpoints(model_dir)):
        return
    previous = config_lib.from_dict(type(experiment), read_params(model_dir), source=path)
    differences = task.model_differences(previous.model, experiment.model)
    if differences:
        raise IncompatibleRunError(
            f"{model_dir} holds a run with another model ({_listed(differences)}). Resume it "
            f"with its own config ({path}), or start a new --model_dir (with --init_checkpoint "
            f"{model_dir} to start from its weights).")
    differences = task.input_differences(previous, experiment)
    if differences and not allow_data_change:
        raise IncompatibleRunError(
            f"resuming {model_dir} with other training data ({_listed(differences)}) would "
            "not continue the run it holds; use its settings (see its params.yaml), start a "
            "new --model_dir, or pass --allow_data_change to resume anyway")
    if differences:
        logging.warning("resuming with other training data (--allow_data_change): %s",
                        _listed(differences))
