"""Noticing a worker of a multi-worker run that disappeared without warning.

A worker killed outright (SIGKILL, the OOM killer, a machine that vanished)
never runs TensorFlow's preemption handling. The others learn of it from
TensorFlow's coordination service, which runs inside the coordination
leader (the chief, else worker 0): every worker sends it a heartbeat, and
the service checks them once a second. When a worker's heartbeats stop for
`runtime.worker_timeout_seconds`, the service aborts the collectives of
every other worker, whose train step then raises an `UnavailableError`
naming the lost task (`/job:worker/replica:0/task:1`). When the leader
itself is lost, the others' heartbeats to it fail after the same timeout
(`DeadlineExceededError` ... `RPC: /tensorflow.CoordinationService/Heartbeat`),
or their next collective fails at once when its connection is reset.

Collective timeouts (`CommunicationOptions(timeout_seconds=...)`) are not
used: TensorFlow starts a thread per collective for them, and they would
also fire while a worker waits for the chief to write a checkpoint or
evaluate, which takes longer than a heartbeat timeout should.

This module sets the heartbeat timeout before the strategy starts, and turns
the survivor's error into a `LostWorkerError` naming the lost worker.
"""

import dataclasses
import re

import tensorflow as tf
from tensorflow.compiler.xla.tsl.protobuf import coordination_config_pb2
from tensorflow.python.distribute import multi_worker_util
from tensorflow.python.eager import context

# The jobs whose tasks train (and so send heartbeats) in a MultiWorkerMirroredStrategy run.
_TRAINING_JOBS = ("chief", "worker")
# What a survivor's train step raises when a peer or the coordination leader is gone.
_LOST_PEER_ERRORS = (tf.errors.UnavailableError, tf.errors.DeadlineExceededError,
                     tf.errors.AbortedError, tf.errors.CancelledError)
_TASK = re.compile(r"/job:(\w+)(?:/replica:\d+)?/task:(\d+)")
# The coordination service's list of tasks whose heartbeats stopped.
_UNHEALTHY = re.compile(r"stopped sending heartbeats\):\s*((?:/job:\S+\s*)+)")
# A survivor's own heartbeat to the coordination leader failed: the leader is gone.
_LEADER_UNREACHABLE = "RPC: /tensorflow.CoordinationService/Heartbeat"


@dataclasses.dataclass(frozen=True)
class LostTask:
    """A task of the cluster that is gone: its job, index and address (from `TF_CONFIG`)."""

    job: str
    index: int
    address: str

    def __str__(self):
        return f"{self.job} {self.index} ({self.address})"


class LostWorkerError(RuntimeError):
    """A worker of a multi-worker run disappeared; the run stopped on this worker.

    Restarting every worker resumes from `checkpoint` (None: no checkpoint yet).

    Args:
      lost: the `LostTask`s the error named (none: the coordination service in this
        worker failed).
      checkpoint: path of the run's newest checkpoint, or None.
      step: the step of `checkpoint`, or None.
      how: what TensorFlow saw ("stopped sending heartbeats", ...).
    """

    def __init__(self, lost: "list[LostTask]", checkpoint: str | None, step: int | None,
                 how: str):
        self.lost = tuple(lost)
        self.checkpoint = checkpoint
        self.step = step
        named = ", ".join(str(task) for task in self.lost)
        what = f"lost {named} of the cluster" if self.lost else "the cluster's coordination failed"
        kept = (f"the last checkpoint is step {step} ({checkpoint})" if checkpoint
                else "no checkpoint was written yet")
        super().__init__(
            f"{what} ({how}); this worker stopped and {kept}: restart every worker with the "
            "same command to resume from it")


def configure_heartbeat_timeout(seconds: float, cluster_spec: tf.train.ClusterSpec,
                                task_type: str) -> None:
    """Sets the coordination service's heartbeat timeout; call before the strategy starts.

    `MultiWorkerMirroredStrategy` configures the service itself, with
    TensorFlow's default timeout (10 s), unless it was configured before;
    this configures it the same way with `seconds` instead.

    Args:
      seconds: how long a worker's heartbeats may stop before the others stop.
      cluster_spec: the run's `tf.train.ClusterSpec` (from `TF_CONFIG`).
      task_type: this process's job ("worker", "chief", ...); other jobs than
        those two (an evaluator) are left to TensorFlow, as it does.
    """
    if task_type not in _TRAINING_JOBS:
        return
    jobs = [coordination_config_pb2.CoordinatedJob(name=job,
                                                   num_tasks=cluster_spec.num_tasks(job))
            for job in _TRAINING_JOBS if job in cluster_spec.jobs]
    context.context().configure_coordination_service(
        service_type="standalone",
        service_leader=multi_worker_util.coordination_leader(cluster_spec),
        heartbeat_timeout_in_ms=int(seconds * 1000),
        coordinated_jobs=jobs)


def lost_tasks(error: BaseException, cluster_spec: tf.train.ClusterSpec,
               own_task: tuple[str, int]) -> "tuple[list[LostTask], str] | None":
    """`(tasks, how)` when `error` says a task of the cluster is gone, else None.

    `tasks` is empty when this worker runs the coordination service and its own
    heartbeat went unanswered: the run cannot go on, but no peer is known lost.

    Args:
      error: an exception raised by a multi-worker train step, evaluation or save.
      cluster_spec: the run's `tf.train.ClusterSpec`.
      own_task: `(job, index)` of this process (never reported as lost).
    """
    if not isinstance(error, _LOST_PEER_ERRORS):
        return None
    message = getattr(error, "message", str(error))
    unhealthy = _UNHEALTHY.search(message)
    if unhealthy:
        names, how = unhealthy.group(1), "it stopped sending heartbeats"
    elif _LEADER_UNREACHABLE in message:
        names = multi_worker_util.coordination_leader(cluster_spec)
        how = "its coordination service stopped answering heartbeats"
        leader = _TASK.search(names)
        if (leader.group(1), int(leader.group(2))) == tuple(own_task):
            # This worker runs the service: no peer is known to be gone.
            return [], ("this worker runs its coordination service, which did not answer "
                        "its heartbeat in time: an overloaded machine, or "
                        "runtime.worker_timeout_seconds too small for it")
    else:
        names, how = message, "its connection was lost"
    tasks = []
    for job, index in _TASK.findall(names):
        task = (job, int(index))
        if task == tuple(own_task) or job not in cluster_spec.jobs:
            continue
        if task[1] >= cluster_spec.num_tasks(job):
            continue
        lost = LostTask(job, task[1], cluster_spec.task_address(job, task[1]))
        if lost not in tasks:
            tasks.append(lost)
    return (tasks, how) if tasks else None


def lost_worker_error(error: BaseException, strategy: tf.distribute.Strategy,
                      latest_checkpoint: str | None) -> LostWorkerError | None:
    """The `LostWorkerError` to stop with when `error` says a worker is gone, else None.

    Args:
      error: what the train step, an evaluation or a save raised.
      strategy: the run's strategy (only multi-worker runs lose workers).
      latest_checkpoint: the run's newest checkpoint (`.../ckpt-<step>`), or None.
    """
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return None
    resolver = strategy.cluster_resolver
    found = lost_tasks(error, resolver.cluster_spec(), (resolver.task_type, resolver.task_id))
    if found is None:
        return None
    # Checkpoints are numbered by their step (`TrainingCheckpoint.save`).
    step = int(latest_checkpoint.rsplit("-", 1)[1]) if latest_checkpoint else None
    return LostWorkerError(found[0], latest_checkpoint, step, found[1])
