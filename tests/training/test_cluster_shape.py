"""The cluster shape record of checkpoints and the resume plan of another shape (in process)."""

import logging
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.models import BertEncoder, BertPretrainer
from bert_tf.training import cluster_shape
from bert_tf.training.checkpointing import TrainingCheckpoint
from bert_tf.training.cluster_shape import (
    IN_CHECKPOINT,
    PER_WORKER,
    ClusterShape,
    SavedShape,
    ShapeError,
)
from bert_tf.training.loss_scale import LossScale
from tests.helpers import TINY

TWO_WORKERS = ClusterShape(num_workers=2, num_replicas=2, global_batch_size=8,
                           input_distribution="per_worker")
ONE_PROCESS = ClusterShape(num_workers=1, num_replicas=1, global_batch_size=8,
                           input_distribution="per_worker")


def test_the_record_is_written_with_the_checkpoint_and_never_restored(tmp_path):
    step = tf.Variable(7, dtype=tf.int64)
    saved = SavedShape(TWO_WORKERS, PER_WORKER)
    prefix = tf.train.Checkpoint(step=step, cluster_shape=cluster_shape.ShapeRecord(saved)).save(
        os.path.join(tmp_path, "ckpt"))
    assert cluster_shape.read_saved_shape(prefix) == saved

    # A run of another shape restores the step, and keeps its own record for its next save.
    step.assign(0)
    mine = cluster_shape.ShapeRecord(SavedShape(ONE_PROCESS, IN_CHECKPOINT))
    tf.train.Checkpoint(step=step, cluster_shape=mine).restore(
        prefix).assert_existing_objects_matched()
    assert int(step.numpy()) == 7 and mine.saved.shape == ONE_PROCESS

    older = tf.train.Checkpoint(step=step).save(os.path.join(tmp_path, "older"))
    assert cluster_shape.read_saved_shape(older) is None


def test_a_damaged_record_names_the_checkpoint():
    with pytest.raises(ShapeError, match=r"^runs/x/ckpt-4: the cluster shape record"):
        SavedShape.from_json('{"num_workers": 2}', "runs/x/ckpt-4")


def test_the_same_shape_restores_each_workers_own_input_state():
    plan = cluster_shape.plan_resume(SavedShape(TWO_WORKERS, PER_WORKER), TWO_WORKERS,
                                     worker_index=1, step=10)
    assert (plan.input_from_worker, plan.skip_batches, plan.reshaped) == (1, 0, False)
    plan = cluster_shape.plan_resume(SavedShape(ONE_PROCESS, IN_CHECKPOINT), ONE_PROCESS,
                                     worker_index=0, step=10)
    assert (plan.input_from_worker, plan.reshaped) == (0, False)


def test_global_input_carries_its_position_to_any_worker_count():
    saved = SavedShape(ClusterShape(2, 2, 8, "global"), PER_WORKER)
    for current, worker in ((ClusterShape(1, 1, 8, "global"), 0),
                            (ClusterShape(4, 4, 8, "global"), 3)):
        plan = cluster_shape.plan_resume(saved, current, worker_index=worker, step=10)
        assert (plan.input_from_worker, plan.skip_batches, plan.reshaped) == (0, 0, True)
        assert "the input position carries over" in plan.describe("ckpt-10", 10)


def test_per_worker_input_on_another_shape_skips_the_batches_of_the_step():
    saved = SavedShape(TWO_WORKERS, PER_WORKER)
    plan = cluster_shape.plan_resume(saved, ONE_PROCESS, worker_index=0, step=10)
    assert (plan.input_from_worker, plan.skip_batches) == (None, 10)
    # One process with two local replicas reads two per-replica batches a step.
    mirrored = ClusterShape(1, 2, 8, "per_worker")
    assert cluster_shape.plan_resume(saved, mirrored, 0, step=10).skip_batches == 20
    # Another global batch (--allow_data_change) on the same workers: re-derived too.
    bigger = ClusterShape(2, 2, 16, "per_worker")
    assert cluster_shape.plan_resume(saved, bigger, 1, step=3).skip_batches == 3
    line = plan.describe("ckpt-10", 10)
    assert line == (
        "ckpt-10 (step 10) was written by 2 workers (2 replicas), global batch 8 (4 per "
        "worker), per_worker input; resuming on 1 worker (1 replica), global batch 8 (8 per "
        "worker), per_worker input: model, optimizer and step restored; the input position is "
        "re-derived from the step: each input pipeline skips the 10 batches this shape reads "
        "in 10 steps (the examples differ from those the old shape would have read)")


def test_a_batch_the_new_replicas_cannot_split_is_one_line_naming_both_shapes():
    three = ClusterShape(3, 3, 8, "per_worker")
    with pytest.raises(ShapeError) as error:
        cluster_shape.check_trainable(three, 1, SavedShape(TWO_WORKERS, PER_WORKER),
                                      "runs/x/ckpt-10")
    assert str(error.value) == (
        "cannot resume runs/x/ckpt-10, written by 2 workers (2 replicas), global batch 8 "
        "(4 per worker), per_worker input, on 3 workers (3 replicas), global batch 8, "
        "per_worker input: 8 examples do not split into 3 equal replica batches; resume it "
        "on 1, 2, 4 or 8 replicas")
    with pytest.raises(ShapeError, match=r"^trainer.global_batch_size=8 cannot train on 3 "
                                         r"workers .*; use 1, 2, 4 or 8 replicas or another"):
        cluster_shape.check_trainable(three)
    # Each replica's batch must split into whole gradient-accumulation micro-batches.
    with pytest.raises(ShapeError, match="its 4 examples per replica do not split into "
                                         "trainer.gradient_accumulation_steps=8 micro-batches; "
                                         "resume it on 1 replicas"):
        cluster_shape.check_trainable(TWO_WORKERS, 8, SavedShape(ONE_PROCESS, IN_CHECKPOINT),
                                      "ckpt-10")
    cluster_shape.check_trainable(TWO_WORKERS, 4)
    cluster_shape.check_trainable(ClusterShape(4, 8, 8, "global"))


def test_skipping_batches_advances_the_iterator_exactly():
    iterator = iter(tf.data.Dataset.range(100).batch(3))
    cluster_shape.skip_batches(iterator, 5)
    assert next(iterator).numpy().tolist() == [15, 16, 17]
    cluster_shape.skip_batches(iterator, 0)
    assert next(iterator).numpy().tolist() == [18, 19, 20]


def _run_state(model_dir, shape, *, per_worker_input, worker_index=0, seed=0):
    """A TrainingCheckpoint over a tiny pretrainer, an optimizer and a counting iterator."""
    keras.utils.set_random_seed(seed)
    model = BertPretrainer(BertEncoder.from_encoder_config(TINY))
    optimizer = keras.optimizers.Adam()
    optimizer.build(model.trainable_variables)
    step = tf.Variable(0, dtype=tf.int64)
    iterator = iter(tf.data.Dataset.range(1000))
    checkpoint = TrainingCheckpoint(
        str(model_dir), model=model, optimizer=optimizer, step=step,
        loss_scale=LossScale(enabled=False), iterator=iterator, max_to_keep=2, shape=shape,
        chief=worker_index == 0, worker_index=worker_index, per_worker_input=per_worker_input)
    return checkpoint, model.variables + optimizer.variables, iterator


def _train_and_save(checkpoint, variables, iterator, steps):
    for variable in variables:  # any change the restore must bring back
        variable.assign(variable + tf.cast(1 + steps, variable.dtype))
    for _ in range(steps):
        next(iterator)
    checkpoint.step.assign(steps)
    checkpoint.save()
    return [variable.numpy() for variable in variables]


def test_a_checkpoint_of_one_process_restores_exactly_on_two_workers(tmp_path, caplog):
    written = _run_state(tmp_path, ONE_PROCESS, per_worker_input=False)
    saved = _train_and_save(*written, steps=3)
    # Worker 1 of two, two replicas each: two per-replica batches a step.
    shape = ClusterShape(2, 4, 8, "per_worker")
    checkpoint, variables, iterator = _run_state(tmp_path, shape, per_worker_input=True,
                                                 worker_index=1, seed=1)
    with caplog.at_level(logging.INFO):
        checkpoint.restore_latest()
    for before, variable in zip(saved, variables):
        np.testing.assert_array_equal(variable.numpy(), before, err_msg=variable.path)
    assert int(checkpoint.step.numpy()) == 3
    assert int(next(iterator)) == 6  # 3 steps of 2 batches skipped in a fresh pipeline
    lines = [r.getMessage() for r in caplog.records if "was written by" in r.getMessage()]
    assert len(lines) == 1 and "skips the 6 batches this shape reads in 3 steps" in lines[0]


def test_global_input_of_two_workers_carries_its_position_into_one_process(tmp_path, caplog):
    two = ClusterShape(2, 2, 8, "global")
    for worker in (0, 1):  # each worker writes its own input state
        written = _run_state(tmp_path, two, per_worker_input=True, worker_index=worker)
        saved = _train_and_save(*written, steps=5)
    checkpoint, variables, iterator = _run_state(tmp_path, ClusterShape(1, 1, 8, "global"),
                                                 per_worker_input=False, seed=1)
    with caplog.at_level(logging.INFO):
        checkpoint.restore_latest()
    for before, variable in zip(saved, variables):
        np.testing.assert_array_equal(variable.numpy(), before, err_msg=variable.path)
    assert int(next(iterator)) == 5  # restored, not skipped
    assert cluster_shape.read_saved_shape(checkpoint.latest).shape == two
    assert any("the input position carries over" in r.getMessage() for r in caplog.records)
    # Its next checkpoint records the shape it was written with.
    checkpoint.save()
    assert cluster_shape.read_saved_shape(checkpoint.latest).shape.num_workers == 1
