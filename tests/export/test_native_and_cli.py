"""`native.load_model` / task records, and `python -m bert_tf.export` on model directories."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.checkpoints import native, task_record
from bert_tf.checkpoints.assign import CheckpointMismatchError
from bert_tf.checkpoints.task_record import TaskRecord
from bert_tf.export import load_export
from bert_tf.export.__main__ import main as export_main
from tests.export.export_helpers import TASKS, build_model


def _inputs():
    return {"token_ids": np.array([[101, 7592, 2088, 102, 0]], np.int32),
            "segment_ids": np.zeros([1, 5], np.int32),
            "padding_mask": np.array([[1, 1, 1, 1, 0]], np.int32)}


def test_load_model_reads_newest_training_checkpoint(tmp_path, tokenizer, vocab_file):
    info = TASKS["classifier"]
    model = build_model("classifier", info, seed=1)
    native.write_metadata(model, str(tmp_path), tokenizer.tokenizer_contract(), vocab_file,
                          record=info)
    checkpoint = tf.train.Checkpoint(weights=native.weights_dict(model))
    manager = tf.train.CheckpointManager(checkpoint, str(tmp_path), max_to_keep=2)
    manager.save()  # ckpt-1: the initial weights
    expected = model(_inputs())["logits"].numpy()
    model.head.dense.kernel.assign(model.head.dense.kernel + 1.0)
    manager.save()  # ckpt-2: changed head
    newest = model(_inputs())["logits"].numpy()
    assert not np.allclose(expected, newest)

    loaded, metadata = native.load_model(str(tmp_path))
    assert type(loaded).__name__ == "BertClassifier"
    assert metadata["task"] == info
    np.testing.assert_array_equal(loaded(_inputs())["logits"].numpy(), newest)


def test_load_model_names_the_mismatched_key(tmp_path):
    model = build_model("token_classifier", TASKS["token_classifier"])
    native.save(model, str(tmp_path))
    path = tmp_path / native.METADATA_NAME
    metadata = json.loads(path.read_text())
    metadata["task_args"]["num_labels"] = 3  # the checkpoint has 5
    path.write_text(json.dumps(metadata))
    with pytest.raises(CheckpointMismatchError,
                       match=r"heads/token_classification_head/dense/kernel.*expected shape "
                             r"\(32, 3\), found \(32, 5\)"):
        native.load_model(str(tmp_path))


@pytest.mark.parametrize("change, message", [
    ({"kind": "tagger"}, "'kind' must be one of"),
    ({"max_seq_length": 1}, "'max_seq_length' must be an integer >= 2"),
    ({"label_names": []}, "'label_names' \\(for kind 'classifier'\\) must be a non-empty list"),
    ({"text_inputs": 3}, "'text_inputs' .* must be 1 or 2, got 3"),
])
def test_task_record_errors(change, message):
    with pytest.raises(ValueError, match=message):
        TaskRecord.from_dict({**TASKS["classifier"].to_dict(), **change},
                             "run/bert_tf_model.json")


def test_kind_of_model():
    assert task_record.kind_of_model("BertClassifier", {"num_classes": 1}) == "regressor"
    assert task_record.kind_of_model("BertClassifier", {"num_classes": 3}) == "classifier"
    assert task_record.kind_of_model("BertPretrainer", {"use_nsp": True}) == "pretrainer"
    with pytest.raises(ValueError, match="unknown model_class 'Foo'"):
        task_record.kind_of_model("Foo", {})


@pytest.fixture(scope="module")
def pretrainer_dir(tmp_path_factory, tokenizer, vocab_file):
    """An older-style model directory: a pretrainer with no "task" record."""
    directory = tmp_path_factory.mktemp("pretrain_run")
    model = build_model("pretrainer", None, seed=3)
    native.save(model, str(directory), tokenizer.tokenizer_contract(), vocab_file)
    # `save` records a pretrainer's task now; directories written before
    # task records existed have none.
    path = directory / native.METADATA_NAME
    metadata = json.loads(path.read_text())
    del metadata["task"]
    path.write_text(json.dumps(metadata))
    return str(directory), model


def test_cli_exports_versions(pretrainer_dir, tmp_path, capsys):
    model_dir, model = pretrainer_dir
    base = str(tmp_path / "exports" / "mlm")
    # No task record: the length must be given.
    assert export_main(["--model_dir", model_dir, "--export_dir", base]) == 1
    assert "pass --max_seq_length" in capsys.readouterr().err
    assert not os.path.exists(os.path.join(base, "1"))

    assert export_main(["--model_dir", model_dir, "--export_dir", base,
                        "--max_seq_length", "16"]) == 0
    assert capsys.readouterr().out.strip() == os.path.join(base, "1")
    assert export_main(["--model_dir", model_dir, "--export_dir", base,
                        "--max_seq_length", "16", "--version", "1"]) == 1
    assert "already exists" in capsys.readouterr().err
    assert sorted(os.listdir(base)) == ["1"]  # no temporary directory left behind

    exported = load_export(os.path.join(base, "1"))
    metadata = exported.metadata
    assert metadata["kind"] == "pretrainer" and metadata["max_seq_length"] == 16
    assert metadata["tokenizer"]["vocab_size"] == 30522
    assert metadata["tokenizer"]["lower_case"] is True
    assert metadata["bert_tf_version"]
    assert metadata["signatures"]["serving_default"] == ["text"]
    assert os.listdir(os.path.join(base, "1", "assets")) == ["vocab.txt"]

    out = exported.predict(["Hello world"])
    features = {"token_ids": np.array([[101, 7592, 2088, 102] + [0] * 12], np.int32),
                "segment_ids": np.zeros([1, 16], np.int32),
                "padding_mask": np.array([[1] * 4 + [0] * 12], np.int32)}
    expected = model.encoder(features)["pooled_output"].numpy()
    assert np.max(np.abs(out["pooled_output"] - expected)) <= 1e-5
    assert out["padding_mask"].tolist() == features["padding_mask"].tolist()


def test_export_model_rejects_a_record_that_does_not_fit(tokenizer, tmp_path):
    from bert_tf.export import export_model

    model = build_model("classifier", TASKS["classifier"])
    info = TASKS["classifier"].replace(label_names=("a", "b", "c"))
    with pytest.raises(ValueError, match="'label_names' has 3 names but the model has "
                                         "num_classes=2"):
        export_model(model, tokenizer, str(tmp_path / "bad"), info)
    assert not (tmp_path / "bad").exists()


def test_a_converted_checkpoint_exports_without_flags(tmp_path, vocab_file, capsys,
                                                      monkeypatch):
    """`python -m bert_tf.convert`'s output carries an encoder record: no --max_seq_length."""
    from bert_tf.checkpoints import loading
    from bert_tf.convert import main as convert_main

    google_dir, converted = tmp_path / "google", tmp_path / "converted"
    loading.save(build_model("encoder", None, seed=4), str(google_dir), "google", vocab_file)
    assert convert_main(["--from", "google", "--input", str(google_dir),
                         "--output", str(converted), "--lower_case"]) == 0
    capsys.readouterr()

    # The record is checked once per export, where it is read (it used to be three times).
    checks = []
    original = TaskRecord._check
    monkeypatch.setattr(TaskRecord, "_check",
                        lambda self, source: checks.append(source) or original(self, source))
    base = str(tmp_path / "exports" / "converted")
    assert export_main(["--model_dir", str(converted), "--export_dir", base]) == 0, (
        capsys.readouterr().err)
    assert len(checks) == 1, checks

    metadata = load_export(os.path.join(base, "1")).metadata
    positions = metadata["encoder_config"]["max_position_embeddings"]
    assert (metadata["kind"], metadata["max_seq_length"]) == ("encoder", positions)
    assert TaskRecord.from_dict(metadata["task"]) == TaskRecord(
        kind="encoder", name="encoder", max_seq_length=positions)


def test_records_written_before_the_version_key_still_read():
    # As the trainer wrote them for MRPC and STS-B before records were versioned.
    mrpc = {"name": "glue", "kind": "classifier", "max_seq_length": 128, "glue_task": "mrpc",
            "text_inputs": 2, "label_names": ["0", "1"]}
    stsb = {"name": "glue", "kind": "regressor", "max_seq_length": 128, "glue_task": "stsb",
            "text_inputs": 2, "label_names": []}
    assert TaskRecord.from_dict(mrpc) == TaskRecord(
        kind="classifier", name="glue", max_seq_length=128, dataset="mrpc", text_inputs=2,
        label_names=("0", "1"))
    assert TaskRecord.from_dict(stsb).to_dict() == {
        "kind": "regressor", "name": "glue", "max_seq_length": 128, "dataset": "stsb",
        "text_inputs": 2, "version": 1}
