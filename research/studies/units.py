"""One unit of a study: a `python -m bert_tf.train` run that is either finished or not.

A unit is finished when its `model_dir` holds the final evaluation of its
last step (`bert_tf.training.run_directory.finished_results`); running it again otherwise
resumes from its newest checkpoint (the trainer's own resume). Each unit's
trainer output goes to `model_dir/train.log`, and the wall time of every
invocation is appended to `model_dir/unit_times.jsonl`, so a study can be
killed at any point and loses at most the unit in progress.

A running unit holds an exclusive lock on `model_dir/unit.lock`, so several
processes of one study (one per core) share its units instead of training
the same one twice. The lock is an `flock`: the kernel drops it when the
processes holding it die, so a killed study leaves nothing stale behind.
"""

import contextlib
import dataclasses
import fcntl
import json
import os
import subprocess
import sys
import time

from bert_tf.training import run_directory

LOG_FILE = "train.log"
TIMES_FILE = "unit_times.jsonl"
LOCK_FILE = "unit.lock"


class UnitFailedError(RuntimeError):
    """A unit's training process exited with an error."""


@dataclasses.dataclass(frozen=True)
class TrainUnit:
    """A training run: config, overrides and where its weights start."""

    name: str
    model_dir: str
    config: str
    overrides: tuple = ()
    init_checkpoint: str | None = None

    def command(self):
        """The `python -m bert_tf.train` command line of this unit."""
        command = [sys.executable, "-m", "bert_tf.train", "--config", self.config,
                   "--model_dir", self.model_dir]
        if self.init_checkpoint:
            command += ["--init_checkpoint", self.init_checkpoint]
        for override in self.overrides:
            command += ["--set", override]
        return command

    def results(self):
        """The final `eval_results.json` contents when finished, else None."""
        return run_directory.finished_results(self.model_dir)

    def run(self, log=print):
        """Runs (or resumes) the unit unless it is finished or running elsewhere.

        Args:
          log: a function taking one line of progress.

        Returns:
          The final results; None when another process holds the unit's lock
          (it is training the unit right now).

        Raises:
          UnitFailedError: the training process failed (the message names the log).
        """
        results = self.results()
        if results is not None:
            return results
        os.makedirs(self.model_dir, exist_ok=True)
        with lock_file(os.path.join(self.model_dir, LOCK_FILE), wait=False) as lock:
            if lock is None:
                return None
            # Another process may have finished the unit between the check above and the lock.
            results = self.results()
            if results is not None:
                return results
            return self._train(lock, log)

    def _train(self, lock, log):
        log_path = os.path.join(self.model_dir, LOG_FILE)
        log(f"== {self.name}: running (log: {log_path})")
        started = time.monotonic()
        with open(log_path, "a", encoding="utf-8") as log_file:
            log_file.write("$ " + " ".join(self.command()) + "\n")
            log_file.flush()
            env = dict(os.environ, PYTHONUNBUFFERED="1")
            env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
            # The trainer shares the lock: the unit stays held while it lives, even if
            # this process dies first.
            code = subprocess.run(self.command(), stdout=log_file, stderr=subprocess.STDOUT,
                                  env=env, pass_fds=(lock.fileno(),)).returncode
        seconds = time.monotonic() - started
        with open(os.path.join(self.model_dir, TIMES_FILE), "a", encoding="utf-8") as f:
            f.write(json.dumps({"seconds": round(seconds, 1), "exit_code": code}) + "\n")
        if code != 0:
            raise UnitFailedError(f"unit {self.name} failed with exit code {code}; see "
                                  f"{log_path}; run the same command to resume it")
        results = self.results()
        if results is None:
            raise UnitFailedError(f"unit {self.name} stopped before its last step (signal?); "
                                  f"run the same command to resume it ({log_path})")
        log(f"== {self.name}: finished in {seconds / 60:.1f} min")
        return results


@contextlib.contextmanager
def lock_file(path, wait):
    """Holds an exclusive `flock` on `path` (created if missing) for the block.

    Args:
      path: the lock file.
      wait: block until the lock is free; otherwise give up at once.

    Yields:
      The open lock file, or None when `wait` is False and another process holds it.
    """
    with open(path, "a", encoding="utf-8") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield None
            return
        yield f


def wall_seconds(model_dir):
    """Total wall time of every recorded invocation of the unit in `model_dir`."""
    path = os.path.join(model_dir, TIMES_FILE)
    if not os.path.isfile(path):
        return 0.0
    with open(path, encoding="utf-8") as f:
        return sum(json.loads(line)["seconds"] for line in f if line.strip())
