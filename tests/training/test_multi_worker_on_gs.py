"""Two `multi_worker` processes on localhost whose model_dir is a gs:// bucket, killed and resumed.

TensorFlow's own GCS file system against the local emulator (tests/gcs_emulator.py):
the chief writes the checkpoints and run files to the bucket, the other worker its
input position and its share of each save. Both are killed outright mid-run; the
same command on both resumes from the newest checkpoint in the bucket.
"""

import re
import signal

import pytest
import tensorflow as tf
from conftest import start_workers, train_command

# Worker processes, an emulator and real HTTP round trips: the second test command
# (about 2.5 minutes on 2 loaded cores, 115 CPU seconds with its workers).
pytestmark = pytest.mark.long

TRAIN_STEPS = 12
# The workers reach each other by gRPC on localhost, which would otherwise take the
# proxy that the environment names for TensorFlow's GCS requests.
NO_GRPC_PROXY = {"no_grpc_proxy": "localhost,127.0.0.1"}
# TensorFlow's preemption handling asks the metadata server whether it runs on Google
# Cloud (`failure_handling_util.on_gcp`); refused, it is not, as this machine is not.
GCE_DETECTION = "http://metadata.google.internal/computeMetadata/v1/instance/hostname"


def _fingerprints(outputs):
    return {line for log in outputs for line in log.splitlines()
            if line.startswith("weights fingerprint:")}


def test_two_workers_on_gs_are_killed_and_resume_from_the_bucket(gcs, write_config):
    gcs.expect_refused(GCE_DETECTION)
    config = write_config(trainer={"train_steps": TRAIN_STEPS, "steps_per_loop": 2,
                                   "checkpoint_every": 4, "eval_every": 0})
    model_dir = gcs.path("cluster")
    command = train_command(config, model_dir, "--strategy", "multi_worker")
    env = dict(gcs.environment, **NO_GRPC_PROXY, GCS_RETRY_CONFIG_MAX_RETRIES="2")
    processes = start_workers(command, **env)
    output = []
    try:
        for line in processes[0].stdout:
            output.append(line)
            match = re.search(rf"step (\d+)/{TRAIN_STEPS}", line)
            if match and int(match.group(1)) >= 6:
                break
        else:
            pytest.fail("the chief stopped before step 6:\n" + "".join(output[-40:]))
    finally:
        for process in processes:
            process.send_signal(signal.SIGKILL)
            process.communicate()
    killed_at = tf.train.latest_checkpoint(model_dir)
    assert killed_at is not None and killed_at.startswith(f"{model_dir}/ckpt-"), killed_at
    step = int(killed_at.rsplit("-", 1)[1])
    assert 4 <= step < TRAIN_STEPS

    processes = start_workers(command, **env)
    outputs = [process.communicate(timeout=900)[0] for process in processes]
    for process, log in zip(processes, outputs):
        assert process.returncode == 0, log[-3000:]
        assert f"resumed from {killed_at} (step {step})" in log, log[-3000:]
    assert len(_fingerprints(outputs)) == 1  # both workers hold the same weights
    assert tf.train.latest_checkpoint(model_dir) == f"{model_dir}/ckpt-{TRAIN_STEPS}"
    names = gcs.object_names()
    for name in ("params.yaml", "bert_tf_model.json", "vocab.txt"):
        assert f"cluster/{name}" in names, names
    # Each worker's input position, at the final step, beside the chief's checkpoints.
    for worker in (0, 1):
        assert f"cluster/input_state/worker_{worker}/input-{TRAIN_STEPS}.index" in names, names
    # The other worker's share of each save was removed after the save.
    assert not [name for name in names if name.startswith("cluster/.worker_1/")
                and f"-{TRAIN_STEPS}." in name], names
