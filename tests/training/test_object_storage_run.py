"""A whole run on object storage, through TensorFlow's in-memory `ram://` file system.

`ram://` takes the same `tf.io.gfile` route as `gs://` and has no POSIX
path: corpus, vocabulary, config, model_dir and exports all live there, and
nothing may appear on the local disk (no folder named `ram:` anywhere).
"""

import glob
import logging
import os
import tempfile
import uuid

import numpy as np
import pytest
import tensorflow as tf
import yaml
from conftest import REPO, tiny_experiment

import bert_tf
from bert_tf import storage, tasks, train
from bert_tf.checkpoints import readable
from bert_tf.export import __main__ as export_cli

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


def _entries_named_like_a_scheme(*roots):
    """Local paths whose name starts with `ram:` under `roots` (a split run leaves one)."""
    found = []
    for root in roots:
        for folder, names, files in os.walk(root):
            names[:] = [name for name in names if name not in (".git", "__pycache__")]
            found += [os.path.join(folder, name) for name in names + files
                      if name.startswith("ram:")]
    return found


@pytest.fixture
def no_local_writes(tmp_path, monkeypatch):
    """Runs the test in an empty working and temporary directory; both must stay empty."""
    cwd, temporary = tmp_path / "cwd", tmp_path / "tmp"
    cwd.mkdir()
    temporary.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("TMPDIR", str(temporary))
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    yield
    assert not os.listdir(cwd), os.listdir(cwd)
    # AutoGraph caches the Python it generates from our functions there: no run data.
    written = [name for name in os.listdir(temporary)
               if not name.startswith("__autograph_generated_file")]
    assert not written, written
    assert not _entries_named_like_a_scheme(REPO, str(tmp_path)), \
        _entries_named_like_a_scheme(REPO, str(tmp_path))


# A whole journey (two trainings, an evaluation, two exports): the second test command.
@pytest.mark.slow
@pytest.mark.long
def test_a_run_trains_resumes_exports_and_loads_on_object_storage(
        bert_corpus, shared_file, no_local_writes, caplog, capsys):
    root = f"ram://journey-{uuid.uuid4().hex[:8]}"
    corpus, vocab = _copy_inputs_to(root, bert_corpus,
                                    shared_file("vocab", "bert-base-uncased-vocab.txt"))
    config = _write_config(root, corpus, vocab, trainer={
        "train_steps": 4, "steps_per_loop": 2, "checkpoint_every": 2, "eval_every": 4,
        "eval_steps": 1})
    model_dir = storage.join(root, "run")

    assert _train(config, model_dir) == 0
    names = set(storage.listdir(model_dir))
    assert RUN_FILES | {"ckpt-4.index", "train", "eval"} <= names, names
    assert ".lock" not in names  # released when the trainer ended
    assert storage.glob(storage.join(model_dir, "train", "events.out.tfevents.*"))

    # Resumed by a second run to more steps: the run continues where it stopped.
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
