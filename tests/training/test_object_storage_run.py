"""A whole run on object storage, through TensorFlow's in-memory `ram://` file system.

`ram://` takes the same `tf.io.gfile` route as `gs://` and has no POSIX
path: corpus, vocabulary, config, model_dir and exports all live there, and
nothing may appear on the local disk (no folder named `ram:` anywhere).
"""

import glob
import logging
import os
import signal
import uuid

import numpy as np
import pytest
import tensorflow as tf
import yaml
from conftest import tiny_experiment

import bert_tf
from bert_tf import storage, tasks, train
from bert_tf.checkpoints import readable
from bert_tf.export import __main__ as export_cli
from bert_tf.training import progress
from tests.local_disk import LocalDiskGuard

RUN_FILES = {"params.yaml", "bert_tf_model.json", "vocab.txt", "eval_results.json", "checkpoint"}


def _copy_inputs_to(root, bert_corpus, vocab):
    """The corpus and vocab copied under `root`; returns their ram:// locations."""
    corpus = storage.join(root, "corpus")
    storage.makedirs(corpus, exist_ok=True)
    for path in sorted(glob.glob(os.path.join(bert_corpus, "*.txt"))):
        storage.copy(path, storage.join(corpus, os.path.basename(path)))
    storage.copy(vocab, storage.join(root, "vocab.txt"))
    return corpus, storage.join(root, "vocab.txt")


def _write_config(root, corpus, vocab, **sections):
    path = storage.join(root, f"experiment-{uuid.uuid4().hex[:6]}.yaml")
    with storage.open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(tiny_experiment(corpus, vocab, **sections), f)
    return path


def _train(config, model_dir, *overrides):
    task_class, experiment = tasks.load_experiment(config, list(overrides))
    return train.run(task_class, experiment, model_dir)


@pytest.fixture
def no_local_writes(tmp_path, monkeypatch):
    """Runs the test in an empty working and temporary directory; both must stay empty."""
    guard = LocalDiskGuard(tmp_path, monkeypatch)
    yield
    guard.check()


def _sigterm_after_step(monkeypatch, step):
    """This process gets SIGTERM once the trainer has reported `step`, as from a scheduler."""
    report = progress.Progress.update

    def report_then_signal(self, reported, *args, **kwargs):
        report(self, reported, *args, **kwargs)
        if reported == step:
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(progress.Progress, "update", report_then_signal)


# A whole journey (four trainings, an evaluation, two exports): the second test command.
@pytest.mark.slow
@pytest.mark.long
def test_a_run_trains_resumes_exports_and_loads_on_object_storage(
        bert_corpus, shared_file, no_local_writes, monkeypatch, caplog, capsys):
    root = f"ram://journey-{uuid.uuid4().hex[:8]}"
    corpus, vocab = _copy_inputs_to(root, bert_corpus,
                                    shared_file("vocab", "bert-base-uncased-vocab.txt"))
    config = _write_config(root, corpus, vocab, trainer={
        "train_steps": 4, "steps_per_loop": 2, "checkpoint_every": 2, "eval_every": 4,
        "eval_steps": 1})
    model_dir = storage.join(root, "run")

    # SIGTERM (a preemption) after step 1, which is no checkpoint step: the trainer saves
    # it and ends with 0.
    with monkeypatch.context() as patch, caplog.at_level(logging.INFO):
        _sigterm_after_step(patch, 1)
        assert _train(config, model_dir) == 0
    assert "stopped by SIGTERM at step 1 after saving; run the same command to resume" in \
        caplog.messages
    assert readable.listed_checkpoints(model_dir) == [storage.join(model_dir, "ckpt-1")]
    assert not storage.exists(storage.join(model_dir, "eval_results.json"))  # eval_every 4
    caplog.clear()
    with caplog.at_level(logging.INFO):
        assert _train(config, model_dir) == 0
    assert f"resumed from {model_dir}/ckpt-1 (step 1)" in caplog.messages
    names = set(storage.listdir(model_dir))
    assert RUN_FILES | {"ckpt-4.index", "train", "eval"} <= names, names
    assert ".lock" not in names  # released when the trainer ended
    assert storage.glob(storage.join(model_dir, "train", "events.out.tfevents.*"))

    # Resumed by a third run to more steps: the run continues where it stopped.
    caplog.clear()
    with caplog.at_level(logging.INFO):
        assert _train(config, model_dir, "trainer.train_steps=6") == 0
    assert f"resumed from {model_dir}/ckpt-4 (step 4)" in caplog.messages
    results = yaml.safe_load(storage.read_text(storage.join(model_dir, "eval_results.json")))
    assert results["step"] == 6 and set(results["metrics"]) >= {"mlm_accuracy", "nsp_loss"}
    # The run's own files were rewritten whole (object storage writes each once).
    params = yaml.safe_load(storage.read_text(storage.join(model_dir, "params.yaml")))
    assert params["trainer"]["train_steps"] == 6
    assert len(storage.read_text(storage.join(model_dir, "vocab.txt")).splitlines()) == 30522

    encoder = bert_tf.load_encoder(model_dir)
    # The trained step-6 weights, read back from ram://.
    reader = readable.checkpoint_reader(storage.join(model_dir, "ckpt-6"))
    saved = [reader.get_tensor(key) for key, shape in reader.get_variable_to_shape_map().items()
             if "word_embeddings" in key and "optimizer" not in key and shape == [30522, 32]]
    loaded = encoder.embeddings.word_embeddings.embeddings.numpy()
    assert saved and all(np.array_equal(loaded, array) for array in saved)

    # A damaged newest checkpoint is set aside on the bucket, and the run resumes before it.
    shard = storage.join(model_dir, "ckpt-6.data-00000-of-00001")
    size = storage.getsize(shard)
    with storage.open(shard, "wb") as f:
        f.write(b"\0" * size)
    caplog.clear()
    with caplog.at_level(logging.INFO):
        assert _train(config, model_dir, "trainer.train_steps=8") == 0
    assert f"resumed from {model_dir}/ckpt-4 (step 4)" in caplog.messages
    assert any("ckpt-6 does not read back" in message and "ckpt-6.damaged" in message
               for message in caplog.messages), caplog.messages
    assert sorted(storage.listdir(storage.join(model_dir, "ckpt-6.damaged"))) == [
        "ckpt-6.data-00000-of-00001", "ckpt-6.index"]
    assert readable.listed_checkpoints(model_dir)[0] == storage.join(model_dir, "ckpt-8")

    exports = storage.join(root, "exports", "demo")
    assert export_cli.main(["--model_dir", model_dir, "--export_dir", exports]) == 0
    version = storage.join(exports, "1")
    assert storage.isfile(storage.join(version, "saved_model.pb"))
    assert storage.isfile(storage.join(version, "assets.extra", "tf_serving_warmup_requests"))
    assert not [name for name in storage.listdir(exports) if name != "1"]  # no temporary dir
    served = tf.saved_model.load(version).signatures["serving_default"]
    outputs = served(**{name: tf.constant(["the state of the union is strong"])
                        for name in served.structured_input_signature[1]})
    assert all(np.all(np.isfinite(value.numpy())) for value in outputs.values()
               if value.dtype.is_floating)

    # int8 (its kernels change elsewhere): the export is written and loads.
    quantized = storage.join(root, "exports", "int8")
    assert export_cli.main(["--model_dir", model_dir, "--export_dir", quantized,
                            "--quantize", "int8"]) == 0
    assert "serving_default" in tf.saved_model.load(storage.join(quantized, "1")).signatures
    capsys.readouterr()
