"""The cluster shape a checkpoint was written with, and resuming on another one.

What decides which examples each input pipeline reads at a step:

    num_workers         processes of the run (the input pipelines under `per_worker`)
    num_replicas        replicas in sync, over all workers
    global_batch_size   examples per step (per worker and per replica follow from it)
    input_distribution  `per_worker` (each worker reads its shard) or `global` (each
                        worker runs the single-process pipeline and keeps its share)

Every checkpoint stores its shape as JSON under the key `cluster_shape`
(`ShapeRecord`: written with the checkpoint, never restored into the run), with
where its input states are (`input_layout`: in the checkpoint, or one per
worker under `input_state/worker_<k>/`). A resumed run restores the model,
optimizer, step and loss scale whatever its shape; for the input position
`plan_resume` decides:

    same shape                      each worker restores its own input state (exact)
    `global` before and after,      every worker's state is the single-process
    same global batch               pipeline's position: the first one is restored (exact)
    anything else                   the pipelines start afresh and skip the batches this
                                    shape reads in `step` steps (deterministic, but not
                                    the examples the old shape would have read next)

A shape whose replicas do not divide the global batch into equal replica
batches (of whole gradient-accumulation micro-batches) cannot train:
`check_trainable` raises `ShapeError` naming both shapes.
"""

from __future__ import annotations

import dataclasses
import json

import tensorflow as tf

from bert_tf.checkpoints import readable

# The checkpoint key of the record (`tf.train.Checkpoint(cluster_shape=ShapeRecord(...))`).
RECORD_KEY = "cluster_shape/.ATTRIBUTES/VALUE"
# A checkpoint's input state, when it is kept in the checkpoint itself.
INPUT_KEY = "input/.ATTRIBUTES/ITERATOR_STATE"
# Where a run keeps its input states: in the main checkpoint, or one per worker.
IN_CHECKPOINT, PER_WORKER = "checkpoint", "per_worker"


class ShapeError(ValueError):
    """The run cannot train on this cluster shape (one line naming the shapes)."""


@dataclasses.dataclass(frozen=True)
class ClusterShape:
    """The settings that decide how a run's data is sharded and batched."""

    num_workers: int
    num_replicas: int
    global_batch_size: int
    input_distribution: str

    @classmethod
    def of(cls, strategy, global_batch_size: int, input_distribution: str) -> ClusterShape:
        """The shape of a run on `strategy`.

        Args:
          strategy: the run's `tf.distribute.Strategy`.
          global_batch_size: `trainer.global_batch_size`.
          input_distribution: `trainer.input_distribution`.
        """
        from bert_tf.training import strategies

        return cls(strategies.num_workers(strategy), strategy.num_replicas_in_sync,
                   global_batch_size, input_distribution)

    @property
    def batches_per_step(self) -> int:
        """Elements each worker's input iterator yields per step (see `TrainStep`)."""
        if self.input_distribution == "global":
            return 1
        return max(self.num_replicas // self.num_workers, 1)

    def describe(self) -> str:
        """E.g. `2 workers (2 replicas), global batch 8 (4 per worker), per_worker input`."""
        workers = f"{self.num_workers} worker{'s' if self.num_workers != 1 else ''}"
        replicas = f"{self.num_replicas} replica{'s' if self.num_replicas != 1 else ''}"
        per_worker = ""
        if self.global_batch_size % self.num_workers == 0:
            per_worker = f" ({self.global_batch_size // self.num_workers} per worker)"
        return (f"{workers} ({replicas}), global batch {self.global_batch_size}{per_worker}, "
                f"{self.input_distribution} input")


@dataclasses.dataclass(frozen=True)
class SavedShape:
    """A checkpoint's shape and where its input states are."""

    shape: ClusterShape
    input_layout: str

    def to_json(self) -> str:
        return json.dumps({**dataclasses.asdict(self.shape), "input_layout": self.input_layout},
                          sort_keys=True)

    @classmethod
    def from_json(cls, text: str, source: str) -> SavedShape:
        """Parses a record; a malformed one is a `ShapeError` naming `source`."""
        try:
            fields = json.loads(text)
            layout = fields.pop("input_layout")
            return cls(ClusterShape(**fields), layout)
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise ShapeError(f"{source}: the cluster shape record {text!r} is not valid "
                             f"({e})") from None


class ShapeRecord(tf.__internal__.tracking.Trackable):
    """A `tf.train.Checkpoint` entry that writes a `SavedShape` and restores nothing.

    A variable would be restored too, and then written back with the old
    shape; so would TensorFlow's preemption handler's own restore.
    """

    def __init__(self, saved: SavedShape):
        self.saved = saved

    def _serialize_to_tensors(self):
        return {"VALUE": tf.constant(self.saved.to_json())}

    def _restore_from_tensors(self, restored_tensors):
        return tf.no_op()


def read_saved_shape(prefix: str) -> SavedShape | None:
    """The `SavedShape` recorded in checkpoint `prefix`; None for a checkpoint without one."""
    reader = readable.checkpoint_reader(prefix)
    if not reader.has_tensor(RECORD_KEY):
        return None
    value = reader.get_tensor(RECORD_KEY)
    return SavedShape.from_json(value.decode() if isinstance(value, bytes) else str(value),
                                prefix)


def newest_saved_shape(model_dir: str) -> tuple[SavedShape | None, str | None]:
    """`(shape, path)` of `model_dir`'s newest checkpoint; Nones without one or its record.

    A damaged checkpoint gives Nones too: the restore reports it (and takes an older one).
    """
    latest = tf.train.latest_checkpoint(model_dir)
    if latest is None:
        return None, None
    try:
        return read_saved_shape(latest), latest
    except tf.errors.OpError:
        return None, None


def has_input_state(prefix: str) -> bool:
    """Whether checkpoint `prefix` holds an input state of its own (a one-pipeline run)."""
    return readable.checkpoint_reader(prefix).has_tensor(INPUT_KEY)


def usable_replica_counts(global_batch_size: int, accumulation_steps: int = 1) -> list[int]:
    """Replica counts that split `global_batch_size` into equal whole micro-batches."""
    return [n for n in range(1, global_batch_size + 1)
            if global_batch_size % n == 0 and (global_batch_size // n) % accumulation_steps == 0]


def _listed(counts):
    words = [str(n) for n in counts]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def check_trainable(shape: ClusterShape, accumulation_steps: int = 1,
                    saved: SavedShape | None = None, checkpoint: str | None = None) -> None:
    """Raises `ShapeError` when `shape`'s replicas cannot split its global batch.

    Args:
      shape: the shape of this run.
      accumulation_steps: `trainer.gradient_accumulation_steps` (each replica
        splits its batch into this many micro-batches).
      saved: the shape of the checkpoint the run resumes, if any (named in the error).
      checkpoint: that checkpoint's path.
    """
    batch, replicas = shape.global_batch_size, shape.num_replicas
    per_replica = batch // replicas
    if batch % replicas == 0 and per_replica % accumulation_steps == 0:
        return
    what = (f"{batch} examples do not split into {replicas} equal replica batches"
            if batch % replicas else
            f"its {per_replica} examples per replica do not split into "
            f"trainer.gradient_accumulation_steps={accumulation_steps} micro-batches")
    counts = _listed(usable_replica_counts(batch, accumulation_steps))
    if saved is not None:
        raise ShapeError(
            f"cannot resume {checkpoint}, written by {saved.shape.describe()}, on "
            f"{shape.describe()}: {what}; resume it on {counts} replicas")
    raise ShapeError(f"trainer.global_batch_size={batch} cannot train on {shape.describe()}: "
                     f"{what}; use {counts} replicas or another batch size")


@dataclasses.dataclass(frozen=True)
class ResumePlan:
    """How a run of `current` shape resumes the input position of a `saved` checkpoint.

    `input_from_worker` is the saved worker whose input state to restore
    (0 for a one-pipeline checkpoint), or None: skip `skip_batches` instead.
    """

    saved: SavedShape
    current: ClusterShape
    input_from_worker: int | None
    skip_batches: int = 0

    @property
    def reshaped(self) -> bool:
        return self.saved.shape != self.current

    def describe(self, checkpoint: str, step: int) -> str:
        """The one log line of a resume on another shape."""
        where = (f"{checkpoint} (step {step}) was written by {self.saved.shape.describe()}; "
                 f"resuming on {self.current.describe()}: model, optimizer and step restored")
        if self.input_from_worker is not None:
            return (f"{where}; the input position carries over (with global input every "
                    "worker reads the same batches)")
        return (f"{where}; the input position is re-derived from the step: each input "
                f"pipeline skips the {self.skip_batches} batches this shape reads in {step} "
                "steps (the examples differ from those the old shape would have read)")


def plan_resume(saved: SavedShape, current: ClusterShape, worker_index: int,
                step: int) -> ResumePlan:
    """Decides where the input position of a resumed run comes from (see the module doc).

    Args:
      saved: the checkpoint's shape.
      current: this run's shape.
      worker_index: this worker's index in the cluster.
      step: the checkpoint's step.
    """
    if saved.shape == current:
        own = worker_index if saved.input_layout == PER_WORKER else 0
        return ResumePlan(saved, current, own)
    shared = (saved.shape.input_distribution == current.input_distribution == "global"
              and saved.shape.global_batch_size == current.global_batch_size)
    if shared:
        return ResumePlan(saved, current, 0)
    return ResumePlan(saved, current, None, step * current.batches_per_step)


def skip_batches(iterator, count: int) -> None:
    """Advances `iterator` by `count` elements, in one `tf.function` (no Python per batch)."""
    @tf.function
    def advance(count):
        for _ in tf.range(count):
            next(iterator)

    if count:
        advance(tf.constant(count, tf.int64))
