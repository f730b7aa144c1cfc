"""Training checkpoints: everything needed to resume a run exactly.

A checkpoint holds
  step                  the global step (int64)
  model_variables       every model variable (trainable or not: dropout's
                        `SeedGenerator` state too), keyed by position and path
  optimizer_variables   every optimizer variable, keyed the same way
  weights               the model's weights under their canonical names, so
                        `bert_tf.load_encoder(model_dir)` reads a run directly
  loss_scale            the dynamic loss scale
  input                 the training input iterator (tf.data state), single worker
  cluster_shape         the cluster shape it was written with (`cluster_shape`),
                        never restored: a run resumed on another shape restores
                        everything else and re-derives the input position

Model and optimizer variables are listed explicitly: a Keras 3 model given
to `tf.train.Checkpoint` saves only what the optimizer reaches, and Keras'
automatic names (`SeedGenerator`, the optimizer) carry a process-wide
counter, so keys use the variable's position and its path without counters.

The input state is tf.data's, buffers included, and so can hold a read error
the pipeline met before the save (see `input_faults`). Model, optimizer and
step never depend on it: when an input state is found to replay such an error,
`restore_latest` restores everything else of the newest checkpoint and
re-derives the input position from an older checkpoint's input state (or the
start of the data), advanced by the batches in between.

A save into a directory that takes no new files (full, read-only, without
write permission) raises `CheckpointWriteError`, one line naming the directory
and the last good checkpoint, which stays the newest.

With `MultiWorkerMirroredStrategy` each worker's input pipeline reads its own
shard, so one iterator state cannot serve all workers: each worker keeps its
own under `input_state/worker_<k>/` with the same step numbers. Non-chief
workers must take part in every save (the save is collective) and write
their copy of the main checkpoint to a scratch directory.
"""

import dataclasses
import errno
import logging
import os
import re
import uuid

import numpy as np
import tensorflow as tf

from bert_tf import storage
from bert_tf.checkpoints import native, readable
from bert_tf.training import cluster_shape

CHECKPOINT_NAME = "ckpt"
# The global step in a checkpoint.
_STEP_KEY = "step/.ATTRIBUTES/VARIABLE_VALUE"


class NonFiniteWeightsError(RuntimeError):
    """The weights hold NaN or Inf; they are never written over a good checkpoint."""


class CheckpointWriteError(RuntimeError):
    """A checkpoint could not be written (full disk, read-only directory); the last good one
    is kept."""


# TF writes a sharded checkpoint into `<prefix>_temp/` and renames its files when
# every shard is written; a failed or killed save leaves that directory behind.
_PARTIAL_SAVE_PATTERNS = (f"{CHECKPOINT_NAME}-*_temp", "input-*_temp")


def remove_partial_saves(directory):
    """Deletes what failed or killed saves left in `directory`; returns the paths removed."""
    removed = []
    for pattern in _PARTIAL_SAVE_PATTERNS:
        for path in sorted(storage.glob(os.path.join(storage.escape(directory), pattern))):
            if storage.isdir(path):
                storage.rmtree(path, ignore_errors=True)
                removed.append(path)
    return removed


def _is_disk_full(error):
    if isinstance(error, tf.errors.ResourceExhaustedError):
        return True
    return isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT)


_UNWRITABLE_ERRNOS = (errno.EACCES, errno.EPERM, errno.EROFS)
# TensorFlow's file errors end with the C library's reason: "...ckpt-8_temp; Read-only file system".
_TF_REASON = re.compile(r"; (Read-only file system|Permission denied|Operation not permitted)")


def unwritable_reason(error):
    """Why `error` could not write a file ("Read-only file system", ...); None for other errors.

    Args:
      error: an `OSError` or a `tf.errors.OpError` of a write.
    """
    if isinstance(error, OSError):
        return os.strerror(error.errno) if error.errno in _UNWRITABLE_ERRNOS else None
    if isinstance(error, tf.errors.PermissionDeniedError):
        found = _TF_REASON.search(error.message)
        return found.group(1) if found else "Permission denied"
    return None


def _megabytes(num_bytes):
    return f"{num_bytes / 2**20:,.1f} MB"


def unwritable_run_directory(error, model_dir):
    """The one-line error of a write that `model_dir` refused; None for any other error.

    Args:
      error: an `OSError` or a `tf.errors.OpError`.
      model_dir: the run directory.
    """
    reason = unwritable_reason(error)
    if reason is None:
        return None
    path = error.filename if isinstance(error, OSError) else error.message.split(";")[0]
    if not path or not os.fspath(path).startswith(os.fspath(model_dir)):
        return None
    return (f"cannot write the run directory {model_dir}: {reason} ({path}); its checkpoints "
            "are kept: make it writable and run the same command to resume")


def stable_variable_dict(variables):
    """`{"<index>/<path>": variable}` with Keras' per-process counters removed.

    Keras makes automatic names unique per process (`seed_generator_110`,
    `adam_w_1`), so numeric suffixes are dropped from the path; the index
    keeps the keys unique, the path makes a mismatch readable.
    """
    keys = {}
    for index, variable in enumerate(variables):
        path = re.sub(r"_\d+(?=/|$)", "", variable.path)
        keys[f"{index:04d}/{path}"] = variable
    return keys


def all_finite(variables):
    """True when every floating variable is finite."""
    return all(bool(tf.reduce_all(tf.math.is_finite(v)))
               for v in variables if tf.as_dtype(v.dtype).is_floating)


class TrainingCheckpoint:
    """A `tf.train.CheckpointManager` over the run's state, with a finite check on save.

    `shape` (a `cluster_shape.ClusterShape`) is recorded in every checkpoint;
    a checkpoint of another shape restores as `cluster_shape.plan_resume` says.
    """

    def __init__(self, model_dir, *, model, optimizer, step, loss_scale, iterator, max_to_keep,
                 shape, chief=True, worker_index=0, per_worker_input=False):
        self.model_dir = model_dir
        self.model = model
        self.step = step
        self.chief = chief
        self.iterator = iterator
        self.worker_index = worker_index
        self.shape = shape
        # How the last restore took its input position (`cluster_shape.ResumePlan`).
        self.resume_plan = None
        # Their size estimates what a checkpoint needs on disk.
        self._saved_variables = list(model.variables) + list(optimizer.variables)
        # What every checkpoint restores, whatever shape wrote it.
        self._state = dict(step=step, model_variables=stable_variable_dict(model.variables),
                           optimizer_variables=stable_variable_dict(optimizer.variables),
                           weights=native.weights_dict(model), loss_scale=loss_scale)
        objects = dict(self._state)
        if not per_worker_input:
            objects["input"] = iterator
        layout = cluster_shape.PER_WORKER if per_worker_input else cluster_shape.IN_CHECKPOINT
        objects["cluster_shape"] = cluster_shape.ShapeRecord(
            cluster_shape.SavedShape(shape, layout))
        self.checkpoint = tf.train.Checkpoint(**objects)
        # Where the iterator's input state came from: the checkpoint it was restored from,
        # or None (the start of the data, or a position re-derived from it). Input states
        # found to replay a read error (`input_faults`), and the checkpoints saved since
        # the last input restore, which inherited its buffers.
        self.input_source = None
        self._replaying = set()
        self._saved_since_input_restore = []
        # The untouched iterator's state, the last resort of a re-derived input position.
        self._input_start = f"ram://bert_tf_input_start/{uuid.uuid4().hex}/input"
        tf.train.Checkpoint(input=iterator).write(self._input_start)
        self.scratch_dir = None if chief else os.path.join(model_dir, f".worker_{worker_index}")
        self._restored = None  # the checkpoint `restore_latest` restored
        self._max_to_keep = max_to_keep
        self.manager = self._new_manager()
        self.input_manager = None
        if per_worker_input:
            self.input_manager = tf.train.CheckpointManager(
                tf.train.Checkpoint(input=iterator),
                os.path.join(model_dir, "input_state", f"worker_{worker_index}"),
                max_to_keep=max_to_keep, checkpoint_name="input", step_counter=step)
        for directory in self._directories():
            for path in remove_partial_saves(directory):
                logging.info("removed %s, left by an interrupted checkpoint save", path)

    def _new_manager(self):
        # The manager reads the `checkpoint` state file once, when it is made.
        return tf.train.CheckpointManager(
            self.checkpoint, self.scratch_dir or self.model_dir, max_to_keep=self._max_to_keep,
            checkpoint_name=CHECKPOINT_NAME, step_counter=self.step)

    def _directories(self):
        """Every directory this worker writes checkpoints into."""
        directories = [self.manager.directory]
        if self.input_manager is not None:
            directories.append(self.input_manager.directory)
        return directories

    @property
    def latest(self):
        """The newest checkpoint of the run (the chief's), or None."""
        return tf.train.latest_checkpoint(self.model_dir)

    @property
    def latest_saved(self):
        """The chief's path of the newest checkpoint this process saved or restored, or None.

        Read from memory (no storage access): what a process leaving in a hurry names.
        A worker's own copies (in `scratch_dir`, removed once written) have the numbers
        of the chief's.
        """
        latest = self.manager.latest_checkpoint or self._restored
        return os.path.join(self.model_dir, os.path.basename(latest)) if latest else None

    def restore_latest(self):
        """Restores the newest checkpoint that reads back; returns its path, or None if none.

        Every tensor of a checkpoint is read (and so checksummed) before any
        is restored, so a damaged checkpoint never leaves half its state in
        the run. Each damaged newer one is reported in one line and, by the
        chief, set aside as `ckpt-N.damaged/` (see `readable.set_aside`).

        Raises:
          readable.CheckpointReadError: checkpoints are listed but none reads back.
        """
        latest, _, damaged = readable.newest_readable(self.model_dir)
        if latest is None:
            return None
        for damage in damaged:
            where = f"; set aside as {self.set_aside(damage.prefix)}" if self.chief else ""
            logging.warning("checkpoint %s does not read back (%s)%s; resuming from %s instead",
                            os.path.basename(damage.prefix), damage, where,
                            os.path.basename(latest))
        self._restored = latest
        # Only the shape decides the input position; the rest restores whatever wrote it.
        tf.train.Checkpoint(**self._state).restore(
            latest).assert_existing_objects_matched().expect_partial()
        step = int(self.step.numpy())
        saved = self._saved_shape(latest, step)
        plan = self.resume_plan = cluster_shape.plan_resume(saved, self.shape,
                                                            self.worker_index, step)
        self._saved_since_input_restore = []
        if plan.input_from_worker is None:
            self.input_source = None
            self._restore_input(self._input_start)
            cluster_shape.skip_batches(self.iterator, plan.skip_batches)
        elif latest in self._replaying:
            self._rederive_input(latest, step, plan.input_from_worker)
        else:
            self.input_source = latest
            self._restore_input(self._input_state_path(latest, saved, plan.input_from_worker,
                                                       step))
        if plan.reshaped:
            logging.warning("%s", plan.describe(os.path.basename(latest), step))
        return latest

    def _restore_input(self, path):
        # `read`, the counterpart of `write`: the start state has no save counter.
        tf.train.Checkpoint(input=self.iterator).read(
            path).assert_existing_objects_matched().expect_partial()

    def mark_input_replaying(self):
        """Marks the input state in use, and those saved since it was restored, as replaying.

        The next `restore_latest` then re-derives the input position rather
        than restore a marked state. Returns the prefixes marked.
        """
        marked = [self.input_source, *self._saved_since_input_restore]
        self._replaying.update(marked)
        return marked

    def _rederive_input(self, latest, step, worker):
        """Positions the input at `step` of `latest` without its (replaying) input state.

        From the newest older checkpoint of this shape whose input state is
        not marked, advanced by the batches of the steps between the two; from
        the start of the data when there is none. Either way the pipeline
        yields the batches an uninterrupted run reads after `step`.
        """
        for prefix in readable.listed_checkpoints(self.model_dir):
            if prefix in self._replaying:
                continue
            older_step = int(readable.checkpoint_reader(prefix).get_tensor(_STEP_KEY))
            saved = self._saved_shape(prefix, older_step)
            if older_step >= step or saved.shape != self.shape:
                continue
            self._restore_input(self._input_state_path(prefix, saved, worker, older_step))
            self.input_source, start = prefix, older_step
            break
        else:
            self._restore_input(self._input_start)
            self.input_source, start = None, 0
        skipped = (step - start) * self.shape.batches_per_step
        cluster_shape.skip_batches(self.iterator, skipped)
        logging.warning(
            "%s (step %d): its input state is not used; the input position is re-derived "
            "from %s, %d batches on", os.path.basename(latest), step,
            os.path.basename(self.input_source) if self.input_source else "the start of the data",
            skipped)

    def _saved_shape(self, prefix, step):
        """The shape `prefix` records; for an older checkpoint without a record, its best guess.

        Such a checkpoint is taken to have this run's batch and replicas per
        worker; its worker count is read from where its input states are.
        """
        saved = cluster_shape.read_saved_shape(prefix)
        if saved is not None:
            return saved
        if cluster_shape.has_input_state(prefix):
            workers, layout = 1, cluster_shape.IN_CHECKPOINT
        else:
            states = storage.glob(os.path.join(storage.escape(self.model_dir), "input_state",
                                               "worker_*", f"input-{step}.index"))
            workers, layout = max(len(states), 1), cluster_shape.PER_WORKER
        replicas_per_worker = max(self.shape.num_replicas // self.shape.num_workers, 1)
        return cluster_shape.SavedShape(
            dataclasses.replace(self.shape, num_workers=workers,
                                num_replicas=workers * replicas_per_worker), layout)

    def _input_state_path(self, prefix, saved, worker, step):
        """Where checkpoint `prefix` (of `saved` shape) keeps worker `worker`'s input state."""
        if saved.input_layout == cluster_shape.IN_CHECKPOINT:
            return prefix
        path = os.path.join(self.model_dir, "input_state", f"worker_{worker}", f"input-{step}")
        if not tf.io.gfile.exists(path + ".index"):
            raise FileNotFoundError(
                f"{prefix} is at step {step} but the input state {path} of worker {worker} "
                "is missing; the input position cannot be restored")
        return path

    def set_aside(self, prefix):
        """Moves checkpoint `prefix` to `<prefix>.damaged/`, out of the manager's list.

        Returns the directory it moved to (see `readable.set_aside`).
        """
        moved = readable.set_aside(prefix)
        self.manager = self._new_manager()
        return moved

    def save(self):
        """Writes a checkpoint at the current step, unless the weights are not finite.

        Raises:
          NonFiniteWeightsError: a weight holds NaN or Inf (nothing is written).
        """
        if not all_finite(self.model.trainable_variables):
            raise NonFiniteWeightsError(
                f"not saving step {int(self.step.numpy())}: the weights hold NaN or Inf; "
                f"the last good checkpoint ({self.latest}) is kept")
        try:
            path = self.manager.save(checkpoint_number=self.step)
            if self.input_manager is not None:
                self.input_manager.save(checkpoint_number=self.step)
        except (tf.errors.ResourceExhaustedError, tf.errors.PermissionDeniedError,
                OSError) as error:
            logging.debug("checkpoint save failed", exc_info=True)
            if _is_disk_full(error):
                raise self._disk_full_error() from None
            reason = unwritable_reason(error)
            if reason is None:
                raise
            raise self._unwritable_error(reason) from None
        if self.scratch_dir:
            storage.rmtree(self.scratch_dir, ignore_errors=True)
            path = None
        if path:
            self._saved_since_input_restore.append(path)
            logging.info("saved checkpoint %s", path)
        return path

    def _unwritable_error(self, reason):
        """The one-line error of a save into a directory that takes no new files."""
        for directory in self._directories():
            remove_partial_saves(directory)
        directory = self.manager.directory
        return CheckpointWriteError(
            f"cannot write checkpoints to {directory}: {reason} (the directory takes no new "
            f"files); could not save step {int(self.step.numpy())}, the last good checkpoint "
            f"({self.latest or 'none'}) is kept: make {directory} writable and run the same "
            "command to resume")

    def _disk_full_error(self):
        """The one-line error of a save that ran out of space, after cleaning up after it."""
        for directory in self._directories():
            remove_partial_saves(directory)
        directory = self.manager.directory
        needed = sum(int(np.prod(v.shape)) * tf.as_dtype(v.dtype).size
                     for v in self._saved_variables)
        free = storage.free_bytes(directory)  # None on object storage
        free = f", {_megabytes(free)} free" if free is not None else ""
        return CheckpointWriteError(
            f"no space left on the device of {directory}: could not save step "
            f"{int(self.step.numpy())} (a checkpoint needs about {_megabytes(needed)}"
            f"{free}); the last good checkpoint ({self.latest or 'none'}) "
            "is kept: free some space and run the same command to resume")
