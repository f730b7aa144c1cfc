"""A study's durable records: its finished runs without their checkpoints.

A study's output directory holds tens of megabytes of checkpoints per run
beside the few files that mark a run finished and that the report reads: the
resolved config, the final evaluation, the curves and the wall times. Those
few files are a run's *record*; its curves are kept as one `scalars.json`
(`research.studies.scalars`), written into the run's folder from its
TensorBoard event files, which stay in the output directory only. `save`
copies the record of every finished run, with `report.md`, `results.json` and
the plots, into a records directory small enough to commit; `restore` copies
finished runs back into an output directory that lacks them or holds them
unfinished. So a study whose machine is lost goes on from its committed
records: the finished runs are skipped, the unfinished ones start over, and the
corpus (built from `../shared/` by a fixed seed) is built again.

A pretraining's record may also keep its final weights (`keep_weights`: a
`weights.*` checkpoint without optimizer state beside the model's
`bert_tf_model.json` and vocabulary, about 45 MB for BERT-mini), because the
fine-tuning runs start from them: restored, they are what those
runs load. A record kept without weights does not supersede a run here that
holds a checkpoint of its own (that run goes on), and a pretraining restored
without weights is pretrained again by the runner when none of its fine-tuning
runs has finished yet (see `research.studies.runner`).
"""

import os
import time
from collections.abc import Callable, Collection

from bert_tf.checkpoints import native
from bert_tf.training.run_directory import EVAL_RESULTS_FILE, PARAMS_FILE, finished_results
from bert_tf.training.run_lock import LOCK_FILE as TRAINER_LOCK_FILE
from research import portable_paths
from research.studies import report, scalars
from research.studies.units import LOCK_FILE, TIMES_FILE, lock_file

# The files of a run's record.
RECORD_FILES = (PARAMS_FILE, EVAL_RESULTS_FILE, TIMES_FILE, scalars.SCALARS_FILE)
# Study-level outputs, rewritten as cells finish.
REPORT_FILES = (report.REPORT_FILE, report.RESULTS_FILE)
# Where `restore` moves what an unfinished run left, inside the run's folder.
SET_ASIDE_PREFIX = "unfinished-"
# The files of kept weights (`native.save_final_weights`); a trainer's own
# run folder has the first two as well, so they travel only beside a `weights` index.
WEIGHTS_INDEX = native.WEIGHTS_PREFIX + ".index"
WEIGHTS_METADATA = (native.METADATA_NAME, native.VOCAB_NAME)
# Held in the run's folder (not the records) while its weights are written.
KEEP_WEIGHTS_LOCK = "keep_weights.lock"


def finished_runs(root: str) -> list[str]:
    """Paths, relative to `root`, of every run folder under it that reached its last step.

    Args:
      root: a study's output or records directory.
    """
    runs = []
    for folder, subfolders, files in os.walk(root):
        if PARAMS_FILE in files and EVAL_RESULTS_FILE in files:
            subfolders.clear()  # a run folder holds no other runs
            if finished_results(folder) is not None:
                runs.append(os.path.relpath(folder, root))
    return sorted(runs)


def _record_paths(run_dir):
    """Paths (relative to the run folder) of the files of the run's record that exist.

    Kept weights come before the index that marks them whole, and the final
    evaluation comes last: it is what marks a run finished, so a copy cut short
    leaves a run that is not finished rather than one missing its curves or weights.
    """
    paths = [name for name in RECORD_FILES if os.path.isfile(os.path.join(run_dir, name))]
    if os.path.isfile(os.path.join(run_dir, WEIGHTS_INDEX)):
        paths += [name for name in sorted(os.listdir(run_dir))
                  if name.startswith(native.WEIGHTS_PREFIX + ".data-")]
        paths += [name for name in WEIGHTS_METADATA if os.path.isfile(os.path.join(run_dir, name))]
        paths.append(WEIGHTS_INDEX)
    return sorted(paths, key=lambda path: (path == EVAL_RESULTS_FILE, path == WEIGHTS_INDEX))


def copy_if_changed(source: str, destination: str,
                    rewrite: Callable[[str, str], str] | None = None):
    """Copies `source` over `destination` (atomically) unless both hold the same bytes.

    Args:
      source: the file copied.
      destination: its copy's path (folders created as needed).
      rewrite: `(file name, text) -> text` applied to what is written, e.g. the
        machine paths of a record made portable (`portable_paths.rewriter`).
    """
    with open(source, "rb") as f:
        data = f.read()
    if rewrite is not None:
        try:
            data = rewrite(os.path.basename(source), data.decode("utf-8")).encode("utf-8")
        except UnicodeDecodeError:
            pass  # not text: copied as it is
    if os.path.isfile(destination):
        with open(destination, "rb") as f:
            if f.read() == data:
                return
    os.makedirs(os.path.dirname(destination), exist_ok=True)
    temporary = f"{destination}.tmp-{os.getpid()}"
    try:
        with open(temporary, "wb") as f:
            f.write(data)
        os.replace(temporary, destination)
    finally:
        # Nothing half-copied is left to be committed with the records.
        if os.path.exists(temporary):
            os.remove(temporary)


def copy_run(source_root: str, destination_root: str, run: str,
             rewrite: Callable[[str, str], str] | None = None):
    """Makes the destination's record of `run` the source's.

    A run trained in the source has its `scalars.json` written (or brought up
    to date) from its event files first: a run trained again (a pretraining
    whose record had no weights) has new curves.

    Args:
      source_root: the folder holding the run (an output directory or records).
      destination_root: the folder the run's record goes to.
      run: the run's folder, relative to both roots.
      rewrite: as in `copy_if_changed`.
    """
    scalars.write_from_events(os.path.join(source_root, run))
    for path in _record_paths(os.path.join(source_root, run)):
        copy_if_changed(os.path.join(source_root, run, path),
                        os.path.join(destination_root, run, path), rewrite)


def _drop_event_files(record_dir):
    """Removes event files (and then empty curve folders) from a record.

    A record keeps its curves in `scalars.json`; records saved before it kept
    the event files themselves.
    """
    for path in scalars.event_files(record_dir):
        os.remove(path)
    for split in scalars.CURVE_DIRS:
        folder = os.path.join(record_dir, split)
        if os.path.isdir(folder) and not os.listdir(folder):
            os.rmdir(folder)


def has_weights(run_dir: str) -> bool:
    """Whether `run_dir` holds weights a fine-tuning run can start from.

    Args:
      run_dir: a trainer's run folder, or a record with kept weights.
    """
    try:
        native.weights_prefix(run_dir)  # the loader's own test for weights
    except FileNotFoundError:
        return False
    return True


def _keep_weights(run_dir, record_dir):
    """Writes the run's final weights into its record unless they are there already.

    A run restored from records that kept no weights has none to keep.
    """
    if os.path.isfile(os.path.join(record_dir, WEIGHTS_INDEX)) or not has_weights(run_dir):
        return
    # Two processes of a study may save at once: one writes, the other then finds the index.
    with lock_file(os.path.join(run_dir, KEEP_WEIGHTS_LOCK), wait=True):
        if not os.path.isfile(os.path.join(record_dir, WEIGHTS_INDEX)):
            native.save_final_weights(run_dir, record_dir)


def save(out_dir: str, records_dir: str, keep_weights: Collection[str] = (),
         output_dir: str | None = None) -> list[str]:
    """Copies the report and every finished run's record from `out_dir` to `records_dir`.

    Files already equal are left alone, so saving after every cell costs little
    and a commit of `records_dir` shows only what changed. A run's curves go
    into the records as `scalars.json`, written into its folder in `out_dir`
    from its event files; the records keep no event files.

    Args:
      out_dir: the study's output directory.
      records_dir: where the records go (created if missing).
      keep_weights: runs (paths relative to `out_dir`, e.g. "pretraining/mlm_nsp")
        whose final weights are kept in their record once they are finished.
      output_dir: the study's output directory when `out_dir` is a folder inside it;
        its paths are written `OUTPUT_DIR/...` in the records (`portable_paths`).

    Returns:
      The finished runs (relative paths) now recorded.
    """
    # Records name no folder of this machine: the data, output and package paths portable.
    rewrite = portable_paths.rewriter(output_dir or out_dir)
    runs = finished_runs(out_dir)
    for run in runs:
        if run in keep_weights:
            # Before the record's evaluation file: a record that says finished has its weights.
            _keep_weights(os.path.join(out_dir, run), os.path.join(records_dir, run))
        copy_run(out_dir, records_dir, run, rewrite)
        _drop_event_files(os.path.join(records_dir, run))
    for name in REPORT_FILES:
        if os.path.isfile(os.path.join(out_dir, name)):
            copy_if_changed(os.path.join(out_dir, name), os.path.join(records_dir, name),
                            rewrite)
    plots = os.path.join(out_dir, report.PLOTS_DIR)
    if os.path.isdir(plots):
        for name in sorted(os.listdir(plots)):
            copy_if_changed(os.path.join(plots, name),
                             os.path.join(records_dir, report.PLOTS_DIR, name))
    return runs


def set_aside(run_dir: str) -> str | None:
    """Moves an unfinished run's files into `run_dir/unfinished-<UTC time>/`.

    The lock files stay: the caller holds the unit's lock on its file. Nothing
    is deleted, so a user can still look at (or resume from) what was there.

    Args:
      run_dir: the run's folder.

    Returns:
      The folder the files went to, or None when there was nothing to move.
    """
    names = [name for name in os.listdir(run_dir)
             if name not in (LOCK_FILE, TRAINER_LOCK_FILE)
             and not name.startswith(SET_ASIDE_PREFIX)]
    if not names:
        return None
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    aside, attempt = os.path.join(run_dir, SET_ASIDE_PREFIX + stamp), 1
    while os.path.exists(aside):  # set aside twice within a second
        attempt += 1
        aside = os.path.join(run_dir, f"{SET_ASIDE_PREFIX}{stamp}-{attempt}")
    os.makedirs(aside)
    for name in names:
        os.replace(os.path.join(run_dir, name), os.path.join(aside, name))
    return aside


def restore(records_dir: str, out_dir: str, log: Callable[[str], None] = print,
            weights_needed: Collection[str] = ()) -> list[str]:
    """Copies into `out_dir` every run finished in `records_dir` and not finished there.

    A run unfinished in `out_dir` (killed, or started on this machine while
    another one finished it) is superseded by its finished record: its files
    are moved into an `unfinished-<time>` folder inside the run folder, not
    deleted, and the record is copied in. A run that another process is
    training right now (it holds the unit's lock, or a trainer holds the run's)
    is left alone, and so is a run of `weights_needed` that holds a checkpoint
    here while its record kept no weights: finishing it here gives its
    fine-tuning runs weights, the record would give them none.

    Args:
      records_dir: a directory written by `save` (missing: nothing to restore).
      out_dir: the study's output directory.
      log: a function taking one line of progress.
      weights_needed: runs (paths relative to `out_dir`) whose weights other runs start from.

    Returns:
      The runs (relative paths) restored.
    """
    if not os.path.isdir(records_dir):
        return []
    restored = []
    for run in finished_runs(records_dir):
        run_dir = os.path.join(out_dir, run)
        if finished_results(run_dir) is not None:
            continue
        os.makedirs(run_dir, exist_ok=True)
        # The unit's own lock: another process of the study cannot start it mid-copy;
        # the trainer's: a trainer started by hand in the folder is not moved from under.
        with lock_file(os.path.join(run_dir, LOCK_FILE), wait=False) as lock, \
                lock_file(os.path.join(run_dir, TRAINER_LOCK_FILE), wait=False) as trainer:
            if lock is None or trainer is None or finished_results(run_dir) is not None:
                continue
            if (run in weights_needed and has_weights(run_dir)
                    and not has_weights(os.path.join(records_dir, run))):
                log(f"{run}: finished in the records, which kept no weights; this unfinished "
                    "run holds a checkpoint, so it goes on here instead")
                continue
            aside = set_aside(run_dir)
            if aside is not None:
                log(f"{run}: finished in the records, so this unfinished run was moved to "
                    f"{aside}")
            copy_run(records_dir, out_dir, run)
            restored.append(run)
    return restored
