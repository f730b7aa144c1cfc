"""A study's durable records: its finished runs without their checkpoints.

A study's output directory holds tens of megabytes of checkpoints per run
beside the few files that mark a run finished and that the report reads: the
resolved config, the final evaluation, the TensorBoard curves and the wall
times. Those few files are a run's *record*. `save` copies the record of every
finished run, with `report.md`, `results.json` and the plots, into a records
directory small enough to commit; `restore` copies finished runs back into an
output directory that lacks them. So a study whose machine is lost goes on
from its committed records: the finished runs are skipped, the unfinished ones
start over, and the corpus (built from `../shared/` by a fixed seed) is built
again. A restored pretraining has no weights: the runs that start from it
need its checkpoint, and the runner says so before it starts one.
"""

import filecmp
import os
import shutil

from bert_tf import sweep
from bert_tf.studies import report
from bert_tf.studies.units import LOCK_FILE, TIMES_FILE, lock_file
from bert_tf.training.trainer import EVAL_RESULTS_FILE, PARAMS_FILE

# The files of a run's record; the curves are the event files of these folders.
RECORD_FILES = (PARAMS_FILE, EVAL_RESULTS_FILE, TIMES_FILE)
CURVE_DIRS = ("train", "eval")
# Study-level outputs, rewritten as cells finish.
REPORT_FILES = (report.REPORT_FILE, report.RESULTS_FILE)


def finished_runs(root: str) -> list[str]:
    """Paths, relative to `root`, of every run folder under it that reached its last step.

    Args:
      root: a study's output or records directory.
    """
    runs = []
    for folder, subfolders, files in os.walk(root):
        if PARAMS_FILE in files and EVAL_RESULTS_FILE in files:
            subfolders.clear()  # a run folder holds no other runs
            if sweep.finished_results(folder) is not None:
                runs.append(os.path.relpath(folder, root))
    return sorted(runs)


def _record_paths(run_dir):
    """Paths (relative to the run folder) of the files of the run's record that exist.

    The final evaluation comes last: it is what marks a run finished, so a copy
    cut short leaves a run that is not finished rather than one missing its curves.
    """
    paths = []
    for curves in CURVE_DIRS:
        folder = os.path.join(run_dir, curves)
        if os.path.isdir(folder):
            paths += [os.path.join(curves, name) for name in sorted(os.listdir(folder))
                      if name.startswith("events.out.tfevents.")]
    paths += [name for name in RECORD_FILES if os.path.isfile(os.path.join(run_dir, name))]
    return sorted(paths, key=lambda path: path == EVAL_RESULTS_FILE)


def _copy_if_changed(source, destination):
    """Copies `source` over `destination` (atomically) unless both hold the same bytes."""
    if os.path.isfile(destination) and filecmp.cmp(source, destination, shallow=False):
        return
    os.makedirs(os.path.dirname(destination), exist_ok=True)
    temporary = f"{destination}.tmp-{os.getpid()}"
    try:
        shutil.copyfile(source, temporary)
        os.replace(temporary, destination)
    finally:
        # Nothing half-copied is left to be committed with the records.
        if os.path.exists(temporary):
            os.remove(temporary)


def _copy_run(source_root, destination_root, run):
    for path in _record_paths(os.path.join(source_root, run)):
        _copy_if_changed(os.path.join(source_root, run, path),
                         os.path.join(destination_root, run, path))


def save(out_dir: str, records_dir: str) -> list[str]:
    """Copies the report and every finished run's record from `out_dir` to `records_dir`.

    Files already equal are left alone, so saving after every cell costs little
    and a commit of `records_dir` shows only what changed.

    Args:
      out_dir: the study's output directory.
      records_dir: where the records go (created if missing).

    Returns:
      The finished runs (relative paths) now recorded.
    """
    runs = finished_runs(out_dir)
    for run in runs:
        _copy_run(out_dir, records_dir, run)
    for name in REPORT_FILES:
        if os.path.isfile(os.path.join(out_dir, name)):
            _copy_if_changed(os.path.join(out_dir, name), os.path.join(records_dir, name))
    plots = os.path.join(out_dir, report.PLOTS_DIR)
    if os.path.isdir(plots):
        for name in sorted(os.listdir(plots)):
            _copy_if_changed(os.path.join(plots, name),
                             os.path.join(records_dir, report.PLOTS_DIR, name))
    return runs


def restore(records_dir: str, out_dir: str) -> list[str]:
    """Copies into `out_dir` every run finished in `records_dir` whose folder it lacks.

    A run folder already in `out_dir` is left alone, finished or not: an
    unfinished one resumes from its own checkpoint as usual.

    Args:
      records_dir: a directory written by `save` (missing: nothing to restore).
      out_dir: the study's output directory.

    Returns:
      The runs (relative paths) restored.
    """
    if not os.path.isdir(records_dir):
        return []
    restored = []
    for run in finished_runs(records_dir):
        run_dir = os.path.join(out_dir, run)
        if os.path.exists(run_dir):
            continue
        os.makedirs(run_dir, exist_ok=True)
        # The unit's own lock: another process of the study cannot start it mid-copy.
        with lock_file(os.path.join(run_dir, LOCK_FILE), wait=False) as lock:
            if lock is None:
                continue
            _copy_run(records_dir, out_dir, run)
            restored.append(run)
    return restored
