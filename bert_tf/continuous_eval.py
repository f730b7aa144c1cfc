"""Evaluation beside the run: each checkpoint of a model_dir evaluated as it appears.

    python -m bert_tf.evaluate --model_dir RUN --watch [--poll_seconds 30] [--timeout SECONDS] \\
        [--best_metric NAME] [--best_mode auto|max|min] [--export_best EXPORTS/NAME]

Model Garden's `continuous_eval` mode: a process on another host follows the
trainer. `Watcher.run` polls the run's `checkpoint` state file and, for each
checkpoint it has not evaluated, in step order:

  1. restores its weights into one model (built once) and computes the task's
     official metrics (`Task.evaluate_model`: what `evaluate` prints);
  2. writes them to TensorBoard under `RUN/eval/` at the checkpoint's step,
     with the trainer's tags (`summaries.summary_tag`), so TensorBoard draws
     them on the training curves' charts; one event file per checkpoint;
  3. keeps the best checkpoint by one metric in `RUN/best/`
     (`bert_tf.best_checkpoint`), exported on request;
  4. appends `{"checkpoint", "step", "metrics", "seconds"}` as one line of
     `RUN/eval_history.jsonl` (rewritten whole, `storage.atomic_write`: GCS
     cannot append).

The history is what a restarted watcher skips. A checkpoint that disappears
while it is read (`trainer.max_to_keep` deleted it), or does not read back,
is skipped with one log line. The watcher stops once it has seen the
checkpoint at the run's `trainer.train_steps` (the trainer writes the step
count it resolved into params.yaml; it writes no other completion marker),
or after `timeout_seconds` without a new checkpoint. Every file operation
here goes through `bert_tf.storage`, so `RUN` may be a gs:// path.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import time
from collections.abc import Callable

import tensorflow as tf
import yaml

from bert_tf import storage
from bert_tf.best_checkpoint import MODES, BestCheckpoint
from bert_tf.checkpoints import assign, native, readable, weight_map
from bert_tf.training.checkpointing import CHECKPOINT_NAME
from bert_tf.training.inference import inference_fn
from bert_tf.training.run_directory import PARAMS_FILE
from bert_tf.training.summaries import SummaryWriters

HISTORY_FILE = "eval_history.jsonl"
# The trainer's evaluation summaries go there too (`SummaryWriters.eval_dir`).
EVAL_SUBDIR = "eval"
_CHECKPOINT_NAME = re.compile(rf"{re.escape(CHECKPOINT_NAME)}-(\d+)")


class CheckpointNotFoundError(ValueError):
    """The checkpoint asked for is not in the run's directory."""


class CheckpointGoneError(FileNotFoundError):
    """A listed checkpoint's files disappeared before or while it was read."""


def run_checkpoints(model_dir: str) -> list[tuple[int, str]]:
    """`(step, prefix)` of the checkpoints the run's `checkpoint` state file lists, oldest first.

    The trainer numbers each checkpoint by its global step (`ckpt-<step>`).
    """
    found = []
    for prefix in readable.listed_checkpoints(model_dir):
        match = _CHECKPOINT_NAME.fullmatch(os.path.basename(prefix))
        if match:
            found.append((int(match.group(1)), prefix))
    return sorted(found)


def checkpoint_prefix(model_dir: str, name: str) -> str:
    """The prefix of the checkpoint `name` (`ckpt-N`, or a path ending in it) of `model_dir`.

    Raises:
      CheckpointNotFoundError: no such checkpoint (the message lists those there are).
    """
    wanted = os.path.basename(name.rstrip("/"))
    listed = run_checkpoints(model_dir)
    for _, prefix in listed:
        if os.path.basename(prefix) == wanted:
            return prefix
    # A checkpoint the state file no longer lists (e.g. copied in) is still readable.
    prefix = os.path.join(model_dir, wanted)
    if _CHECKPOINT_NAME.fullmatch(wanted) and storage.exists(prefix + ".index"):
        return prefix
    available = ", ".join(os.path.basename(prefix) for _, prefix in listed) or "none"
    raise CheckpointNotFoundError(f"checkpoint {name} is not in {model_dir}; its checkpoints: "
                                  f"{available}")


def _files_exist(prefix: str) -> bool:
    return storage.exists(prefix + ".index") and bool(storage.glob(prefix + ".data-*"))


def build_model(task):
    """`task`'s model in the mixed precision the run trained with (weights not restored)."""
    from bert_tf.training import precision

    # A run's params.yaml holds the policy its trainer resolved; `auto` comes only from --set.
    experiment = precision.resolve_experiment(task.experiment, tf.distribute.get_strategy())
    return task.build_model(dtype=precision.model_dtype(experiment.runtime.mixed_precision))


def restore_checkpoint(model, prefix: str) -> None:
    """Reads every tensor of the checkpoint `prefix` (checksums), then assigns its weights.

    Raises:
      CheckpointGoneError: its files are missing (deleted before or while read).
      readable.CheckpointReadError: it does not read back (damaged).
      assign.CheckpointMismatchError: its weights do not fit `model`.
    """
    slots = weight_map.task_slots(model)
    try:
        readable.read_every_tensor(prefix)
        arrays = native.read_arrays(prefix, slots)
    except tf.errors.OpError as error:
        if not _files_exist(prefix):
            raise CheckpointGoneError(f"checkpoint {prefix} was deleted before it was read "
                                      "completely") from None
        raise readable.CheckpointReadError(
            f"checkpoint {prefix} does not read back ({readable.damage_of(prefix, error)})"
        ) from None
    assign.assign_to_slots(slots, arrays, f"bert_tf checkpoint {prefix}")


def final_step(model_dir: str) -> int | None:
    """The run's `trainer.train_steps` as its params.yaml records it, or None if unknown."""
    path = os.path.join(model_dir, PARAMS_FILE)
    try:
        with storage.open(path, encoding="utf-8") as f:
            values = yaml.safe_load(f)
    except (FileNotFoundError, yaml.YAMLError):
        return None  # not written yet, or being rewritten by a resuming trainer
    steps = (values or {}).get("trainer", {}).get("train_steps")
    return steps if isinstance(steps, int) else None


def wait_for_run(model_dir: str, poll_seconds: float, timeout_seconds: float | None,
                 sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> bool:
    """Waits until the trainer has written the run's params.yaml and bert_tf_model.json.

    Returns:
      True once both exist; False when `timeout_seconds` passed first.
    """
    files = [os.path.join(model_dir, name) for name in (PARAMS_FILE, native.METADATA_NAME)]
    start, announced = clock(), False
    while not all(storage.exists(path) for path in files):
        if timeout_seconds is not None and clock() - start >= timeout_seconds:
            return False
        if not announced:
            logging.info("waiting for the trainer to start in %s", model_dir)
            announced = True
        sleep(poll_seconds)
    return True


class History:
    """`RUN/eval_history.jsonl`: one JSON object per evaluated checkpoint, in order.

    Args:
      model_dir: the run's directory.

    Raises:
      ValueError: a line of the file is not an entry (naming the file and line).
    """

    def __init__(self, model_dir: str):
        self.path = os.path.join(model_dir, HISTORY_FILE)
        self.entries = self._read()

    def _read(self) -> list[dict]:
        if not storage.exists(self.path):
            return []
        entries = []
        with storage.open(self.path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    entry = json.loads(line)
                    int(entry["step"]), dict(entry["metrics"])
                except (ValueError, KeyError, TypeError):
                    raise ValueError(f"{self.path} line {number} is not an evaluation entry "
                                     "(a JSON object with 'step' and 'metrics'); fix or "
                                     "remove it") from None
                entries.append(entry)
        return entries

    @property
    def steps(self) -> set[int]:
        """The steps of the checkpoints evaluated so far."""
        return {int(entry["step"]) for entry in self.entries}

    def append(self, entry: dict) -> None:
        """Adds `entry` and rewrites the file whole (`storage.atomic_write`)."""
        self.entries.append(entry)
        with storage.atomic_write(self.path, encoding="utf-8") as f:
            f.write("".join(json.dumps(e, sort_keys=True) + "\n" for e in self.entries))


def write_summaries(model_dir: str, step: int, checkpoint: str, metrics: dict) -> None:
    """`metrics` at `step` in a new event file of `RUN/eval/`, closed at once.

    A file per checkpoint: a trainer that resumes rewrites the run's event
    files (`summaries.drop_events_after`), which a writer held open across
    checkpoints would go on appending to after they were replaced.
    """
    writer = tf.summary.create_file_writer(os.path.join(model_dir, EVAL_SUBDIR),
                                           filename_suffix=f".{checkpoint}")
    try:
        SummaryWriters.scalars(writer, step, metrics)
    finally:
        writer.close()


@dataclasses.dataclass
class WatchResult:
    """How `Watcher.run` ended."""

    # The history entries this process added, in order.
    evaluated: list[dict]
    # The checkpoints skipped (deleted or damaged), by name.
    skipped: list[str]
    # True: the run's final checkpoint was seen; False: stopped by the timeout.
    complete: bool
    # `best.json`'s record, or None when nothing was evaluated.
    best: dict | None


def _metric_line(metrics: dict) -> str:
    return "  ".join(f"{name} {value:.4f}" for name, value in sorted(metrics.items()))


class Watcher:
    """Evaluates each new checkpoint of a run (see the module docstring).

    Args:
      task: the run's validated task (`evaluate.load_task`); it must support
        host evaluation.
      model_dir: the run's directory.
      batch_size: examples per model call.
      poll_seconds: how often the `checkpoint` state file is read.
      timeout_seconds: stop after this long without a new checkpoint; None:
        only at the run's final checkpoint.
      best_metric: the metric `RUN/best/` is chosen by; None: the task's
        `main_metric`.
      best_mode: "max", "min", or "auto" (`Task.higher_is_better`).
      export_dir: export every new best there (`bert_tf.export`), or None.
      report: called with one line per evaluated checkpoint (default: print).
      sleep, clock: `time.sleep` and `time.monotonic`, replaceable in tests.

    Raises:
      ValueError: `best_mode` unknown, or `RUN/best` chosen by another metric,
        or `best_metric` not among the metrics the history records.
    """

    def __init__(self, task, model_dir: str, *, batch_size: int = 64,
                 poll_seconds: float = 30.0, timeout_seconds: float | None = None,
                 best_metric: str | None = None, best_mode: str = "auto",
                 export_dir: str | None = None, report: Callable[[str], None] | None = None,
                 sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic):
        if best_mode not in MODES:
            raise ValueError(f"best mode must be one of {MODES}, got {best_mode!r}")
        self.task = task
        self.model_dir = model_dir
        self.batch_size = batch_size
        self.poll_seconds = poll_seconds
        self.timeout_seconds = timeout_seconds
        self.metric = best_metric or task.main_metric
        higher = task.higher_is_better(self.metric) if best_mode == "auto" else best_mode == "max"
        self.history = History(model_dir)
        if self.history.entries:
            self._check_metric(self.history.entries[-1]["metrics"])
        self.best = BestCheckpoint(model_dir, self.metric, higher, export_dir)
        self._report = report or (lambda line: print(line, flush=True))
        self._sleep, self._clock = sleep, clock
        self.model = build_model(task)
        self._predict = inference_fn(self.model)

    def _check_metric(self, metrics: dict) -> None:
        if self.metric not in metrics:
            raise ValueError(f"--best_metric {self.metric!r} is not a metric of this run's "
                             f"evaluation; expected one of {sorted(metrics)}")

    def run(self) -> WatchResult:
        """Evaluates checkpoints until the run's final one, or until the timeout."""
        self._recover_best()
        self.best.export_if_due()
        evaluated, skipped = [], []
        seen = set(self.history.steps)
        last_new = self._clock()
        logging.info("watching %s for checkpoints (every %g s; %s)", self.model_dir,
                     self.poll_seconds, "until the run's final step" if self.timeout_seconds
                     is None else f"or {self.timeout_seconds:g} s without a new one")
        while True:
            new = [(step, prefix) for step, prefix in run_checkpoints(self.model_dir)
                   if step not in seen]
            for step, prefix in new:
                entry = self._evaluate(step, prefix)
                if entry is None:
                    skipped.append(os.path.basename(prefix))
                else:
                    evaluated.append(entry)
                seen.add(step)
                last_new = self._clock()
            final = final_step(self.model_dir)
            if final is not None and any(step >= final for step in seen):
                return WatchResult(evaluated, skipped, True, self.best.record)
            if (self.timeout_seconds is not None
                    and self._clock() - last_new >= self.timeout_seconds):
                return WatchResult(evaluated, skipped, False, self.best.record)
            if not new:
                self._sleep(self.poll_seconds)

    def _evaluate(self, step: int, prefix: str) -> dict | None:
        """Evaluates one checkpoint and records it; None when it was skipped."""
        name = os.path.basename(prefix)
        start = self._clock()
        try:
            restore_checkpoint(self.model, prefix)
        except CheckpointGoneError:
            logging.warning("%s was deleted before it could be read (the trainer keeps only "
                            "its newest trainer.max_to_keep checkpoints); skipped", name)
            return None
        except readable.CheckpointReadError as error:
            logging.warning("%s skipped: %s", name, error)
            return None
        metrics = self.task.evaluate_model(self._predict, batch_size=self.batch_size)
        self._check_metric(metrics)
        write_summaries(self.model_dir, step, name, metrics)
        improved = self.best.improves(metrics[self.metric])
        if improved:
            self.best.save(self.model, name, step, metrics)
        entry = {"checkpoint": name, "step": step, "metrics": metrics,
                 "seconds": round(self._clock() - start, 3)}
        self.history.append(entry)
        self._report(f"{name} (step {step}): {_metric_line(metrics)}"
                     + (f"  [best {self.metric}]" if improved else ""))
        return entry

    def _recover_best(self) -> None:
        """Fills an empty `RUN/best/` from the history's best checkpoint, if still there.

        (`RUN/best/` was removed, e.g. to choose by another metric: the
        watcher writes each best copy before its history line.)
        """
        if self.best.record is not None or not self.history.entries:
            return
        best = None
        for entry in self.history.entries:
            if best is None or self.best.improves_on(entry["metrics"][self.metric],
                                                      best["metrics"][self.metric]):
                best = entry
        prefix = os.path.join(self.model_dir, best["checkpoint"])
        try:
            restore_checkpoint(self.model, prefix)
        except (CheckpointGoneError, readable.CheckpointReadError) as error:
            logging.warning("the best checkpoint by %s so far, %s, cannot be copied to %s "
                            "(%s); the best of the checkpoints still to come goes there",
                            self.metric, best["checkpoint"], self.best.directory, error)
            return
        self.best.save(self.model, best["checkpoint"], int(best["step"]), best["metrics"])
        logging.info("copied %s, the best by %s so far, to %s", best["checkpoint"],
                     self.metric, self.best.directory)
