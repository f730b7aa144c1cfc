"""TensorFlow's own `gs://` filesystem against a local Google Cloud Storage emulator.

Every request takes the path it takes on Google Cloud: TensorFlow's libcurl, TLS, the
JSON and upload APIs on www.googleapis.com, reads from storage.googleapis.com. Only the
far end differs: fake-gcs-server on 127.0.0.1, reached through tests/gcs_emulator.py's
proxy. A run writes, reads, lists, renames and deletes objects, and saves and restores
a checkpoint, as a job whose `model_dir` is a bucket does.
"""

import signal

import keras
import numpy as np
import pytest
import tensorflow as tf
import yaml

from tests.gcs_emulator import GOOGLE_APIS_HOSTS
from tests.training.conftest import run_train, start_until_step, tiny_experiment, train_env

# An emulator process and real HTTP round trips: the second test command.
pytestmark = pytest.mark.long


def test_gfile_writes_reads_lists_renames_and_deletes_objects(gcs):
    run = gcs.path("gfile")
    payload = np.random.default_rng(0).bytes(300_001)
    tf.io.gfile.makedirs(f"{run}/events")
    with tf.io.gfile.GFile(f"{run}/weights.bin", "wb") as f:
        f.write(payload)
    with tf.io.gfile.GFile(f"{run}/events/log.txt", "w") as f:
        f.write("step 1\n")
    with tf.io.gfile.GFile(f"{run}/events/log.txt", "a") as f:
        f.write("step 2\n")

    assert tf.io.gfile.exists(f"{run}/weights.bin")
    assert tf.io.gfile.stat(f"{run}/weights.bin").length == len(payload)
    with tf.io.gfile.GFile(f"{run}/weights.bin", "rb") as f:
        assert f.read() == payload
        f.seek(123_456)
        assert f.read(10) == payload[123_456:123_466]
    assert tf.io.gfile.GFile(f"{run}/events/log.txt").read() == "step 1\nstep 2\n"
    assert sorted(tf.io.gfile.listdir(run)) == ["events/", "weights.bin"]
    assert tf.io.gfile.isdir(f"{run}/events")
    assert not tf.io.gfile.isdir(f"{run}/weights.bin")
    assert tf.io.gfile.glob(f"{run}/*.bin") == [f"{run}/weights.bin"]

    tf.io.gfile.rename(f"{run}/weights.bin", f"{run}/weights-final.bin")
    assert not tf.io.gfile.exists(f"{run}/weights.bin")
    assert tf.io.gfile.GFile(f"{run}/weights-final.bin", "rb").read() == payload
    with pytest.raises(tf.errors.NotFoundError):
        tf.io.gfile.GFile(f"{run}/weights.bin", "rb").read()
    # makedirs wrote a marker object for each level, as on Google Cloud.
    assert gcs.object_names() == ["gfile/", "gfile/events/", "gfile/events/log.txt",
                                  "gfile/weights-final.bin"]

    tf.io.gfile.remove(f"{run}/weights-final.bin")
    assert gcs.object_names() == ["gfile/", "gfile/events/", "gfile/events/log.txt"]
    tf.io.gfile.rmtree(run)
    assert gcs.object_names() == []
    assert not tf.io.gfile.exists(f"{run}/events/log.txt")

    # The traffic went where it goes on Google Cloud, through both API hosts.
    hosts = {host for _, host, _ in gcs.requests()}
    assert hosts == set(GOOGLE_APIS_HOSTS), gcs.requests()


def _model_and_optimizer(seed):
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    optimizer = keras.optimizers.Adam(1e-2)
    optimizer.build(model.trainable_variables)
    return model, optimizer


def _checkpoint(model, optimizer, step):
    return tf.train.Checkpoint(model_variables={v.path: v for v in model.variables},
                               optimizer=optimizer, step=step)


def test_checkpoint_manager_saves_prunes_and_restores_on_gs(gcs):
    model, optimizer = _model_and_optimizer(seed=1)
    step = tf.Variable(0, dtype=tf.int64)
    manager = tf.train.CheckpointManager(_checkpoint(model, optimizer, step),
                                         gcs.path("ckpt"), max_to_keep=2)
    x = tf.constant(np.random.default_rng(2).normal(size=(8, 4)), tf.float32)
    for _ in range(3):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x)))
        optimizer.apply(tape.gradient(loss, model.trainable_variables),
                        model.trainable_variables)
        step.assign_add(1)
        manager.save(checkpoint_number=int(step))

    assert manager.checkpoints == [gcs.path("ckpt", "ckpt-2"), gcs.path("ckpt", "ckpt-3")]
    assert tf.train.latest_checkpoint(gcs.path("ckpt")) == gcs.path("ckpt", "ckpt-3")
    assert not any(name.startswith("ckpt/ckpt-1") for name in gcs.object_names())

    restored, restored_optimizer = _model_and_optimizer(seed=7)
    restored_step = tf.Variable(0, dtype=tf.int64)
    assert not np.allclose(restored.variables[0].numpy(), model.variables[0].numpy())
    _checkpoint(restored, restored_optimizer, restored_step).restore(
        tf.train.latest_checkpoint(gcs.path("ckpt"))).assert_consumed()
    assert int(restored_step) == 3
    assert int(restored_optimizer.iterations) == 3
    for saved, loaded in zip(model.variables + optimizer.variables,
                             restored.variables + restored_optimizer.variables):
        np.testing.assert_array_equal(loaded.numpy(), saved.numpy())


def test_pretraining_with_model_dir_on_gs_is_killed_and_resumes(
        gcs, tmp_path, bert_corpus, shared_file):
    experiment = tiny_experiment(bert_corpus, shared_file("vocab", "bert-base-uncased-vocab.txt"),
                                 trainer={"train_steps": 8, "steps_per_loop": 1,
                                          "checkpoint_every": 2, "eval_every": 0})
    config = tmp_path / "experiment.yaml"
    config.write_text(yaml.safe_dump(experiment))
    model_dir = gcs.path("pretrain")
    env = train_env(**gcs.environment)
    process, output = start_until_step(str(config), model_dir, 5, env=env)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)
    killed_at = tf.train.latest_checkpoint(model_dir)
    assert killed_at is not None, "".join(output[-30:])
    result = run_train(str(config), model_dir, env=env, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"resumed from {killed_at}" in result.stderr, result.stderr[-3000:]
    assert tf.train.latest_checkpoint(model_dir) == f"{model_dir}/ckpt-8"
    names = gcs.object_names()
    # The files that describe and guard the run sit beside its checkpoints in the bucket.
    for name in ("params.yaml", "bert_tf_model.json", "vocab.txt"):
        assert f"pretrain/{name}" in names, names
    assert any(name.startswith("pretrain/train/events.out.tfevents.") for name in names), names
