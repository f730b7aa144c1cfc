"""Killing and preempting real training processes, then resuming them.

A run killed with SIGKILL at a random step and restarted with the same
command ends with exactly the weights (and optimizer state) of an
uninterrupted run; SIGTERM saves at the next step boundary (even inside a
multi-step loop) and exits 0.
Op determinism is on and dropout is active, so the dropout RNG state, the
optimizer, the step and the input position must all be restored.
"""

import glob
import os
import random
import re
import shutil
import signal

import numpy as np
import pytest
import tensorflow as tf
import yaml
from conftest import run_train, start_until_step, tiny_experiment
from tensorboard.compat.proto import event_pb2

from bert_tf.checkpoints import native, readable, weight_map

# Real trainer processes killed, signalled or starved mid-run: the second test command.
pytestmark = [pytest.mark.slow, pytest.mark.long]

TRAIN_STEPS = 16


def _write_experiment(tmp_path_factory, bert_corpus, **data):
    from tests import shared_data

    vocab = shared_data.data_path("vocab", "bert-base-uncased-vocab.txt")
    experiment = tiny_experiment(bert_corpus, vocab, data=data, trainer={
        "train_steps": TRAIN_STEPS, "global_batch_size": 8, "steps_per_loop": 1,
        "checkpoint_every": 5, "eval_every": 8, "eval_steps": 2})
    path = tmp_path_factory.mktemp("fault_config") / "experiment.yaml"
    path.write_text(yaml.safe_dump(experiment))
    return str(path)


def _uninterrupted_run(experiment_path, tmp_path_factory):
    """The model_dir of a run that was never interrupted."""
    model_dir = tmp_path_factory.mktemp("uninterrupted")
    result = run_train(experiment_path, model_dir)
    assert result.returncode == 0, result.stderr[-3000:]
    return model_dir


@pytest.fixture(scope="module")
def experiment_path(tmp_path_factory, bert_corpus):
    return _write_experiment(tmp_path_factory, bert_corpus)


@pytest.fixture(scope="module")
def uninterrupted(experiment_path, tmp_path_factory):
    return _uninterrupted_run(experiment_path, tmp_path_factory)


@pytest.fixture(scope="module")
def packed_experiment_path(tmp_path_factory, bert_corpus):
    # Many short instances, so rows really hold several sequences.
    return _write_experiment(tmp_path_factory, bert_corpus, max_sequences_per_row=3,
                             short_seq_prob=0.5, packing_window=32)


def all_state(model_dir):
    """Every tensor of the newest checkpoint but the input state and the save counter."""
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(model_dir)))
    skip = ("input/", "save_counter/", "_CHECKPOINTABLE_OBJECT_GRAPH")
    return {key: reader.get_tensor(key) for key in reader.get_variable_to_shape_map()
            if not key.startswith(skip)}


def assert_same_state(a, b):
    assert a.keys() == b.keys()
    assert any(k.startswith("model_variables/") for k in a)
    assert any(k.startswith("optimizer_variables/") for k in a)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def event_steps(model_dir):
    """`{(subdir, tag): [steps in file order]}` over all event files of a run."""
    steps = {}
    for path in sorted(glob.glob(os.path.join(str(model_dir), "*", "events.out.tfevents.*"))):
        subdir = os.path.basename(os.path.dirname(path))
        for record in tf.data.TFRecordDataset(path):
            event = event_pb2.Event.FromString(record.numpy())
            for value in event.summary.value:
                steps.setdefault((subdir, value.tag), []).append(event.step)
    return steps


def _kill_and_resume(experiment_path, uninterrupted, model_dir):
    kill_step = random.randint(2, TRAIN_STEPS - 2)
    process, _ = start_until_step(experiment_path, model_dir, kill_step)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)
    assert process.returncode == -signal.SIGKILL
    killed_at = tf.train.latest_checkpoint(str(model_dir))

    result = run_train(experiment_path, model_dir)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "resumed from" in result.stderr or killed_at is None, (kill_step, killed_at)
    assert_same_state(all_state(uninterrupted), all_state(model_dir))
    return kill_step


def test_a_packed_run_killed_at_a_random_step_resumes_to_identical_weights(
        packed_experiment_path, tmp_path_factory, tmp_path):
    # Packed rows carry the richest input state; the SIGTERM and damaged-checkpoint tests
    # below resume the unpacked pipeline.
    uninterrupted = _uninterrupted_run(packed_experiment_path, tmp_path_factory)
    kill_step = _kill_and_resume(packed_experiment_path, uninterrupted, tmp_path)
    # TensorBoard: each tag's steps strictly increase across the restart.
    for (subdir, tag), steps in event_steps(tmp_path).items():
        assert steps == sorted(set(steps)), (subdir, tag, steps, kill_step)
    assert event_steps(tmp_path)[("train", "losses/loss")] == list(range(1, TRAIN_STEPS + 1))


def test_sigterm_stops_at_the_next_step_saves_and_resumes(experiment_path, uninterrupted,
                                                         tmp_path):
    # Loops of steps 1-8 and 9-16; the signal lands at the boundary after
    # step 8 or inside the second loop, which then ends early.
    one_loop = ("--set", "trainer.steps_per_loop=8", "--set", "trainer.checkpoint_every=16",
                "--set", "trainer.eval_every=0")
    process, output = start_until_step(experiment_path, tmp_path, 8, *one_loop)
    process.send_signal(signal.SIGTERM)
    output += process.stdout.readlines()
    assert process.wait(timeout=120) == 0, "".join(output[-30:])
    log = "".join(output)
    stopped = int(re.search(r"stopped by SIGTERM at step (\d+) after saving", log).group(1))
    assert 8 <= stopped < TRAIN_STEPS, log[-2000:]
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith(f"ckpt-{stopped}")

    result = run_train(experiment_path, tmp_path, *one_loop)
    assert result.returncode == 0, result.stderr[-3000:]
    assert_same_state(all_state(uninterrupted), all_state(tmp_path))


def damage_two_newest(model_dir):
    """Flips a byte of the newest checkpoint's data shard, truncates the next one's index."""
    from tests.checkpoints.test_damaged_checkpoints import flip_a_byte, truncate_index

    newest, second = readable.listed_checkpoints(str(model_dir))[:2]
    flip_a_byte(newest)
    truncate_index(second)
    return newest, second


def assert_resumed_past(stderr, model_dir, damaged, resumed_from):
    """One warning line per damaged checkpoint, naming the file and the reason; set aside."""
    (data_line,) = [line for line in stderr.splitlines()
                    if f"{os.path.basename(damaged[0])} does not read back" in line]
    (index_line,) = [line for line in stderr.splitlines()
                     if f"{os.path.basename(damaged[1])} does not read back" in line]
    assert f"{damaged[0]}.data-00000-of-00001: Checksum does not match" in data_line
    assert f"{damaged[1]}.index: file is too short to be an sstable" in index_line
    for prefix in damaged:
        assert os.path.isfile(os.path.join(prefix + ".damaged", os.path.basename(prefix)
                                           + ".index"))
    assert f"resuming from {os.path.basename(resumed_from)}" in data_line
    assert "Traceback" not in stderr
    # The run rewrote the damaged steps; the state file lists no damaged checkpoint.
    assert not any(".damaged" in p for p in readable.listed_checkpoints(str(model_dir)))


def test_damaged_newest_checkpoints_are_set_aside_and_the_run_resumes_exactly(
        experiment_path, uninterrupted, tmp_path):
    model_dir = tmp_path / "run"
    shutil.copytree(uninterrupted, model_dir)
    damaged = damage_two_newest(model_dir)
    older = readable.listed_checkpoints(str(model_dir))[2]

    # Readers (load_encoder, evaluate, export) take the newest that reads back, moving nothing.
    model, _ = native.load_model(str(model_dir))
    slots = weight_map.task_slots(model)
    expected = native.read_arrays(older, slots)
    assert len(expected) == len(slots)
    for slot in slots:
        np.testing.assert_array_equal(slot.variable.numpy(), expected[slot.name], slot.name)
    assert readable.listed_checkpoints(str(model_dir))[:2] == list(damaged)

    result = run_train(experiment_path, model_dir)
    assert result.returncode == 0, result.stderr[-3000:]
    assert_resumed_past(result.stderr, model_dir, damaged, older)
    assert_same_state(all_state(uninterrupted), all_state(model_dir))
