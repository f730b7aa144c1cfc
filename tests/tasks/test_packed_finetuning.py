"""Fine-tuning on packed rows (data.max_sequences_per_row > 1): GLUE and NER, tiny encoder."""

import collections
import json
import logging
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import tasks
from bert_tf.checkpoints import readable
from bert_tf.evaluate import evaluate_run
from tests.finetune_helpers import config_overrides, config_path, finetune


def _task(config_name, checkpoint, **values):
    task_class, experiment = tasks.load_experiment(config_path(config_name),
                                                   config_overrides(config_name, **values))
    task = task_class(experiment)
    task.resolve(checkpoint)
    task.validate()
    return task


def _slots(inputs, labels, label_key):
    """(tokens, segments, label) of every example in a batch of packed rows."""
    found = []
    index = inputs["padding_mask"].numpy()
    for row in range(index.shape[0]):
        for k in range(1, index[row].max() + 1):
            where = index[row] == k
            start = int(np.argmax(where))
            assert inputs["cls_positions"].numpy()[row, k - 1] == start
            assert labels["slot_weights"].numpy()[row, k - 1] == 1.0
            found.append((tuple(inputs["token_ids"].numpy()[row][where]),
                          tuple(inputs["segment_ids"].numpy()[row][where]),
                          float(labels[label_key].numpy()[row, k - 1])))
        assert labels["slot_weights"].numpy()[row, index[row].max():].sum() == 0
    return found


def test_glue_packed_rows_hold_every_example_with_its_label(tiny_checkpoint):
    task = _task("glue_mrpc", tiny_checkpoint, **{"data.max_train_examples": 32,
                                                   "data.max_sequences_per_row": 8,
                                                   "data.packing_window": 64})
    inputs, labels = task.make_batch(task._graph_table(task._table("train")),
                                     tf.range(32, dtype=tf.int64))
    mask = inputs["padding_mask"].numpy().astype(bool)
    examples = [(tuple(inputs["token_ids"].numpy()[i][mask[i]]),
                 tuple(inputs["segment_ids"].numpy()[i][mask[i]]),
                 float(labels["label"].numpy()[i])) for i in range(32)]
    # The first window (64 indices: two epochs of 32) packs into whole rows.
    found = []
    for row_inputs, row_labels in task.train_dataset(None, 1):
        found.extend(_slots(row_inputs, row_labels, "label"))
        if len(found) >= 64:
            break
    assert collections.Counter(found) == collections.Counter(examples * 2)
    assert task.num_train_examples < 32  # rows per epoch: MRPC pairs share rows at 128


def test_examples_per_step_count_the_examples_of_packed_rows(tiny_checkpoint):
    values = {"data.max_train_examples": 32, "data.packing_window": 64}
    packed = _task("glue_mrpc", tiny_checkpoint, **values,
                   **{"data.max_sequences_per_row": 8})
    inputs, labels = next(iter(packed.train_dataset(None, 4)))
    # The trainer's examples/s: every example of the 4 rows, not the rows.
    examples = float(packed.batch_examples(inputs, labels))
    assert examples == labels["slot_weights"].numpy().sum() > 4
    plain = _task("glue_mrpc", tiny_checkpoint, **values)
    assert float(plain.batch_examples(*next(iter(plain.train_dataset(None, 4))))) == 4


def test_packing_is_refused_for_squad_naming_the_key(tiny_checkpoint, shared_file):
    squad = shared_file("squad", "dev-v1.1.json")
    with pytest.raises(ValueError,
                       match="data.max_sequences_per_row: the 'squad' task keeps one example"):
        _task("squad_v1", tiny_checkpoint, **{"data.max_sequences_per_row": 8,
                                               "data.train_file": squad, "data.eval_file": squad})


@pytest.mark.slow
@pytest.mark.long
def test_glue_packed_trains_evaluates_and_exports_plain(tiny_checkpoint, tmp_path, shared_file):
    shared_file("glue", "SST-2", "train.tsv")
    model_dir = tmp_path / "sst2"
    code = finetune("glue_sst2", model_dir, tiny_checkpoint, **{
        "data.max_train_examples": 96, "data.max_eval_examples": 40,
        "data.max_sequences_per_row": 8,
        "trainer.train_epochs": 2, "trainer.global_batch_size": 4})
    assert code == 0
    params = yaml_params(model_dir)
    task = _task("glue_sst2", tiny_checkpoint, **{"data.max_train_examples": 96,
                                                   "data.max_sequences_per_row": 8})
    # Steps from the packed rows: 2 epochs of about `num_train_examples` rows at 4 rows a batch.
    assert params["trainer"]["train_steps"] == -(-2 * task.num_train_examples // 4)
    assert params["trainer"]["train_steps"] < 2 * 96 // 4
    metrics = evaluate_run(str(model_dir))
    assert set(metrics) == {"accuracy"} and 0.0 <= metrics["accuracy"] <= 1.0

    # The export is an ordinary classifier with the trained weights: its logits
    # equal the packed model's on one example per row.
    from bert_tf.evaluate import load_run
    from bert_tf.export import export_model_dir, load_export

    metadata = json.loads((model_dir / "bert_tf_model.json").read_text())
    assert "packed" not in metadata["task_args"]
    exported = load_export(export_model_dir(str(model_dir), str(tmp_path / "exports")))
    run_task, model, _ = load_run(str(model_dir))
    inputs, _ = next(iter(run_task.eval_batches("dev", 4)))
    expected = model(inputs, training=False)["logits"].numpy()[:, 0]  # [4, 1, 2] -> [4, 2]
    texts = [example.text_a for example in run_task.examples("dev")[:4]]
    np.testing.assert_allclose(exported.predict(texts)["logits"], expected, atol=1e-5)


@pytest.mark.slow
def test_ner_packed_trains_and_evaluates(tiny_checkpoint, tmp_path, shared_file):
    testa = shared_file("conll2003", "eng.testa")
    code = finetune("ner_conll2003", tmp_path / "ner", tiny_checkpoint, **{
        "data.max_train_examples": 64, "data.max_eval_examples": 30,
        "data.max_sequences_per_row": 8,
        "data.eval_files": f"[{testa}]", "trainer.train_epochs": 1,
        "trainer.global_batch_size": 4})
    assert code == 0
    metrics = evaluate_run(str(tmp_path / "ner"), [testa])
    assert {"f1", "precision", "recall", "accuracy"} <= set(metrics)


def yaml_params(model_dir):
    import yaml

    with open(model_dir / "params.yaml") as f:
        return yaml.safe_load(f)


@pytest.mark.slow
@pytest.mark.long
def test_packed_run_resumes_exactly_past_damaged_checkpoints(tiny_checkpoint, tmp_path, caplog):
    from tests.checkpoints.test_damaged_checkpoints import flip_a_byte, truncate_index

    values = {"data.max_train_examples": 32, "data.max_eval_examples": 16,
                          "data.max_sequences_per_row": 8, "data.packing_window": 64,
                          "trainer.train_epochs": 0, "trainer.train_steps": 6,
                          "trainer.global_batch_size": 4, "trainer.steps_per_loop": 2,
                          "trainer.checkpoint_every": 2, "trainer.max_to_keep": 5}
    uninterrupted = tmp_path / "uninterrupted"
    assert finetune("glue_mrpc", uninterrupted, tiny_checkpoint, **values) == 0
    model_dir = tmp_path / "damaged"
    shutil.copytree(uninterrupted, model_dir)
    newest, second, older = readable.listed_checkpoints(str(model_dir))[:3]
    flip_a_byte(newest)
    truncate_index(second)

    with caplog.at_level(logging.WARNING):
        assert finetune("glue_mrpc", model_dir, tiny_checkpoint, **values) == 0
    lines = [r.getMessage() for r in caplog.records if "does not read back" in r.getMessage()]
    assert len(lines) == 2, lines
    assert f"{newest}.data-00000-of-00001: Checksum does not match" in lines[0]
    assert f"{second}.index: file is too short to be an sstable" in lines[1]
    assert all(f"resuming from {os.path.basename(older)}" in line for line in lines)
    assert os.path.isdir(newest + ".damaged") and os.path.isdir(second + ".damaged")
    # Resumed at ckpt-2, it ends exactly as the run that was never damaged.
    assert _run_state(model_dir).keys() == _run_state(uninterrupted).keys()
    for key, value in _run_state(uninterrupted).items():
        np.testing.assert_array_equal(_run_state(model_dir)[key], value, err_msg=key)


def _run_state(model_dir):
    """Every tensor of the newest checkpoint but the input state and the save counter."""
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(model_dir)))
    return {key: reader.get_tensor(key) for key in reader.get_variable_to_shape_map()
            if key.startswith(("model_variables/", "optimizer_variables/", "step/"))}
