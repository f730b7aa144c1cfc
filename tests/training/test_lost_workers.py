"""Recognising a lost worker in the errors TensorFlow 2.20 raises on the survivors.

The messages are the real ones, copied from survivors of two-worker runs on
localhost (test_strategies.py kills a worker for real).
"""

import pytest
import tensorflow as tf

from bert_tf.training.lost_workers import LostTask, LostWorkerError, lost_tasks
from bert_tf.training.trainer_config import RuntimeConfig

CLUSTER = tf.train.ClusterSpec({"worker": ["host-a:2222", "host-b:2222"]})

# Worker 1 killed: the coordination service (in worker 0) misses its heartbeats.
HEARTBEATS_STOPPED = (
    "Graph execution error:\n\nDetected at node while/cond_2/CollectiveReduceV2 defined at ...\n"
    "Collective ops is aborted by: Error reported from /job:worker/task:1: The following tasks "
    "are unhealthy (stopped sending heartbeats):\n/job:worker/replica:0/task:1\nThe tasks have "
    "crashed. Check the task logs for an earlier error, or scheduler events (e.g. preemption, "
    "eviction) to debug further.\nThe error could be from a previous operation. Restart your "
    "program to reset.\n\t [[{{node while/cond_2/CollectiveReduceV2}}]]")
# Worker 0 (the coordination leader) killed on a machine that stays up.
CONNECTION_RESET = (
    "Graph execution error:\n\nCollective ops is aborted by: recvmsg:Connection reset by peer\n"
    "Additional GRPC error information from remote target /job:worker/replica:0/task:0 while "
    "calling /tensorflow.WorkerService/CompleteInstance:\n:UNKNOWN:Error received from peer  "
    "{grpc_status:14, grpc_message:\"recvmsg:Connection reset by peer\"}\nThe error could be "
    "from a previous operation. Restart your program to reset.")
# Worker 0 frozen (SIGSTOP, a machine gone without closing its connections).
LEADER_SILENT = (
    "Graph execution error:\n\nCollective ops is aborted by: Deadline Exceeded\n\nRPC: "
    "/tensorflow.CoordinationService/Heartbeat\nThe error could be from a previous operation. "
    "Restart your program to reset.")


def test_the_survivors_errors_name_the_lost_worker_and_its_address():
    found = lost_tasks(tf.errors.UnavailableError(None, None, HEARTBEATS_STOPPED), CLUSTER,
                       ("worker", 0))
    assert found == ([LostTask("worker", 1, "host-b:2222")], "it stopped sending heartbeats")
    found = lost_tasks(tf.errors.UnavailableError(None, None, CONNECTION_RESET), CLUSTER,
                       ("worker", 1))
    assert found == ([LostTask("worker", 0, "host-a:2222")], "its connection was lost")
    found = lost_tasks(tf.errors.DeadlineExceededError(None, None, LEADER_SILENT), CLUSTER,
                       ("worker", 1))
    assert found[0] == [LostTask("worker", 0, "host-a:2222")]
    # Worker 0 runs the service: its own heartbeat unanswered (an overloaded machine).
    found = lost_tasks(tf.errors.DeadlineExceededError(None, None, LEADER_SILENT), CLUSTER,
                       ("worker", 0))
    assert found[0] == [] and "runtime.worker_timeout_seconds too small" in found[1]
    message = str(LostWorkerError(found[0], "/runs/a/ckpt-4", 4, found[1]))
    assert message.startswith("the cluster's coordination failed (this worker runs")


def test_other_errors_are_not_a_lost_worker():
    # Another error type, or one naming only this worker, is left as it is.
    assert lost_tasks(tf.errors.InvalidArgumentError(None, None, HEARTBEATS_STOPPED), CLUSTER,
                      ("worker", 0)) is None
    assert lost_tasks(tf.errors.UnavailableError(None, None, "/job:worker/replica:0/task:1 "
                                                 "is out of memory"), CLUSTER,
                      ("worker", 1)) is None
    assert lost_tasks(ValueError(CONNECTION_RESET), CLUSTER, ("worker", 1)) is None


def test_the_error_is_one_line_naming_the_worker_and_the_last_checkpoint():
    error = LostWorkerError([LostTask("worker", 1, "host-b:2222")], "/runs/a/ckpt-8", 8,
                            "it stopped sending heartbeats")
    message = str(error)
    assert "\n" not in message
    assert "worker 1 (host-b:2222)" in message and "step 8 (/runs/a/ckpt-8)" in message
    assert "no checkpoint was written yet" in str(LostWorkerError(
        [LostTask("chief", 0, "host-a:1")], None, None, "its connection was lost"))


def test_worker_timeout_must_be_at_least_a_second():
    with pytest.raises(ValueError, match=r"runtime.worker_timeout_seconds must be >= 1.*got 0"):
        RuntimeConfig(worker_timeout_seconds=0)
