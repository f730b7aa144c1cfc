"""The cluster shape record of checkpoints and the resume plan of another shape (in process)."""

import os

import pytest
import tensorflow as tf

from bert_tf.training import cluster_shape
from bert_tf.training.cluster_shape import (
    IN_CHECKPOINT,
    PER_WORKER,
    ClusterShape,
    SavedShape,
    ShapeError,
)

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
