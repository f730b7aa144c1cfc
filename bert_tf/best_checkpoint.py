"""`RUN/best/`: the weights of a run's best checkpoint so far, as a model directory.

    RUN/best/
      weights.index, weights.data-*   the checkpoint's weights (no optimizer or input state)
      bert_tf_model.json, vocab.txt, params.yaml   copied from the run
      best.json   which checkpoint, by which metric, its metrics, its export (written last)

`python -m bert_tf.export`, `evaluate` and `predict` read the directory as they
read the run. The weights are written from the model the checkpoint was just
restored into, so a checkpoint that `trainer.max_to_keep` deletes after its
evaluation is still kept here. Every file operation goes through
`bert_tf.storage` (gs:// runs).
"""

from __future__ import annotations

import json
import logging
import os

import tensorflow as tf

from bert_tf import storage
from bert_tf.checkpoints import native
from bert_tf.training.run_directory import PARAMS_FILE

BEST_DIR = "best"
RECORD_FILE = "best.json"
# What `--best_mode` takes: "auto" asks the task (`Task.higher_is_better`).
MODES = ("auto", "max", "min")
# Copied from the run, so the directory is a complete model directory.
_RUN_FILES = (native.METADATA_NAME, native.VOCAB_NAME, PARAMS_FILE)


class BestCheckpoint:
    """Keeps `RUN/best/` holding the best checkpoint by one metric, exported on request.

    A restart reads `best.json` back and goes on from it; it refuses to go on
    by another metric or direction than the directory was chosen by.

    Args:
      model_dir: the run's directory.
      metric: the key of the evaluation's metrics that decides.
      higher_is_better: True when a larger value is better.
      export_dir: when given, every new best is exported there as a new
        version (`bert_tf.export`): serving the newest version serves the best.

    Raises:
      ValueError: `best.json` records another metric or direction.
    """

    def __init__(self, model_dir: str, metric: str, higher_is_better: bool,
                 export_dir: str | None = None):
        self.model_dir = model_dir
        self.directory = os.path.join(model_dir, BEST_DIR)
        self.metric = metric
        self.mode = "max" if higher_is_better else "min"
        self.export_dir = export_dir
        self.record = self._read_record()

    def _read_record(self) -> dict | None:
        path = os.path.join(self.directory, RECORD_FILE)
        if not storage.exists(path):
            return None
        with storage.open(path, encoding="utf-8") as f:
            try:
                record = json.load(f)
            except json.JSONDecodeError as error:
                raise ValueError(f"{path} is not valid JSON ({error}); remove {self.directory} "
                                 "to choose the best checkpoint again") from None
        if (record.get("metric"), record.get("mode")) != (self.metric, self.mode):
            raise ValueError(
                f"{self.directory} holds the best checkpoint by {record.get('metric')!r} "
                f"({record.get('mode')}), not by {self.metric!r} ({self.mode}): pass "
                f"--best_metric {record.get('metric')} --best_mode {record.get('mode')}, or "
                f"remove {self.directory} to choose by {self.metric!r}")
        return record

    @property
    def value(self) -> float | None:
        """The best value so far, or None before the first checkpoint."""
        return None if self.record is None else self.record["value"]

    def improves(self, value: float) -> bool:
        """Whether `value` of the metric beats the best so far (a tie does not)."""
        return self.value is None or self.improves_on(value, self.value)

    def improves_on(self, value: float, other: float) -> bool:
        """Whether `value` of the metric is strictly better than `other`."""
        return value > other if self.mode == "max" else value < other

    def save(self, model, checkpoint: str, step: int, metrics: dict[str, float]) -> None:
        """Makes `checkpoint`, whose weights `model` holds, the best; exports it if asked.

        Args:
          model: the task model with the checkpoint's weights restored.
          checkpoint: the checkpoint's name (`ckpt-N`).
          step: its global step.
          metrics: its evaluation (`metric` among them).
        """
        storage.makedirs(self.directory, exist_ok=True)
        self._write_weights(model)
        for name in _RUN_FILES:
            source = os.path.join(self.model_dir, name)
            if storage.exists(source):
                storage.copy(source, os.path.join(self.directory, name))
        self.record = {"checkpoint": checkpoint, "step": step, "metric": self.metric,
                       "mode": self.mode, "value": metrics[self.metric], "metrics": metrics,
                       "export": None}
        self._write_record()
        self.export_if_due()

    def export_if_due(self) -> str | None:
        """Exports the best checkpoint unless `best.json` says it was; returns the version path.

        Also called at start-up: a watcher stopped between saving a best and
        exporting it exports it when it starts again.
        """
        if not (self.export_dir and self.record):
            return None
        exported = self.record.get("export")
        if exported and os.path.dirname(exported) == self.export_dir.rstrip("/"):
            return None
        from bert_tf.export.exporter import export_model_dir

        path = export_model_dir(self.directory, self.export_dir)
        logging.info("exported the best checkpoint (%s) to %s", self.record["checkpoint"], path)
        self.record["export"] = path
        self._write_record()
        return path

    def _write_weights(self, model) -> None:
        """`weights.*` from `model`, renamed into place index last (a reader never takes a
        half-written copy for weights)."""
        final = os.path.join(self.directory, native.WEIGHTS_PREFIX)
        partial = f"{final}-partial-{os.getpid()}"
        tf.train.Checkpoint(**{native.WEIGHTS_KEY: native.weights_dict(model)}).write(partial)
        written = storage.glob(partial + ".*")
        for path in storage.glob(final + ".*"):
            storage.remove(path)
        for path in sorted(written, key=lambda path: path.endswith(".index")):
            storage.rename(path, final + path[len(partial):])

    def _write_record(self) -> None:
        path = os.path.join(self.directory, RECORD_FILE)
        with storage.atomic_write(path, encoding="utf-8") as f:
            json.dump(self.record, f, indent=2, sort_keys=True)
