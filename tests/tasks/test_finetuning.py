"""Fine-tuning tasks end to end: train, evaluate, predict on the real data, with a tiny encoder."""

import csv
import dataclasses
import json
import math
import os

import numpy as np
import pytest
import tensorflow as tf
import yaml

from bert_tf import evaluate, predict, tasks
from bert_tf.evaluate import evaluate_run, load_run
from tests.finetune_helpers import config_overrides, config_path, finetune, finetune_overrides


def _load(config_name, **values):
    return tasks.load_experiment(config_path(config_name), config_overrides(config_name, **values))


def _task(config_name, checkpoint, **values):
    task_class, experiment = _load(config_name, **values)
    task = task_class(experiment)
    task.resolve(checkpoint)
    task.validate()
    return task


def _params(model_dir):
    with open(os.path.join(model_dir, "params.yaml")) as f:
        return yaml.safe_load(f)


# -- configuration -------------------------------------------------------------


def test_resolve_takes_encoder_vocab_and_casing_from_the_checkpoint(tiny_checkpoint):
    task = _task("glue_sst2", tiny_checkpoint)
    encoder = task.experiment.model.encoder
    assert (encoder.hidden_size, encoder.num_layers, encoder.vocab_size) == (32, 2, 30522)
    assert task.experiment.data.vocab_file == os.path.join(tiny_checkpoint, "vocab.txt")
    assert task.experiment.data.lower_case is True


def test_a_vocab_copy_is_the_same_training_data_but_other_tokens_are_not(tiny_checkpoint,
                                                                          tmp_path):
    task = _task("glue_sst2", tiny_checkpoint)
    experiment = task.experiment
    original = experiment.data.vocab_file
    copy = tmp_path / "vocab.txt"
    copy.write_bytes(open(original, "rb").read())
    edited = tmp_path / "edited_vocab.txt"
    edited.write_bytes(open(original, "rb").read().replace(b"\nthe\n", b"\nteh\n", 1))

    def with_vocab(path):
        return dataclasses.replace(experiment, data=dataclasses.replace(experiment.data,
                                                                        vocab_file=str(path)))

    assert task.input_differences(experiment, with_vocab(copy)) == {}
    assert task.input_differences(experiment, with_vocab(edited)) == {
        "data.vocab_file": (original, str(edited))}


def test_resolve_without_a_checkpoint_names_the_missing_keys():
    task_class, experiment = _load("glue_sst2")
    with pytest.raises(ValueError, match="model.encoder and data.vocab_file not set"):
        task_class(experiment).resolve(None)


def test_a_vocab_of_another_size_is_refused_naming_both_keys(tiny_checkpoint, shared_file):
    cased = shared_file("vocab", "bert-base-cased-vocab.txt")
    task_class, experiment = _load("glue_sst2", **{"data.vocab_file": cased})
    task = task_class(experiment)
    task.resolve(tiny_checkpoint)
    with pytest.raises(ValueError, match=r"data.vocab_file .* 28996 tokens but "
                                         r"model.encoder.vocab_size is 30522"):
        task.validate()


@pytest.mark.parametrize("config_name, values, message", [
    ("glue_sst2", {}, "data.data_dir is not set"),
    ("ner_conll2003", {}, "data.train_file is not set"),
    ("ner_conll2003", {"data.train_file": "eng.train"}, "data.eval_files is not set"),
])
def test_the_data_location_is_required_naming_the_key(tiny_checkpoint, config_name, values,
                                                      message):
    # No default under the repository: an installed package has no ../shared.
    task_class, experiment = tasks.load_experiment(config_path(config_name),
                                                   finetune_overrides(**values))
    task = task_class(experiment)
    task.resolve(tiny_checkpoint)
    with pytest.raises(ValueError, match=message):
        task.validate()


def test_unknown_glue_task_lists_the_known_ones(tiny_checkpoint):
    task_class, experiment = _load("glue_sst2", **{"data.task_name": "sst3"})
    task = task_class(experiment)
    task.resolve(tiny_checkpoint)
    with pytest.raises(ValueError, match="sst3.*cola"):
        task.validate()


# -- batches -------------------------------------------------------------------


def test_mrpc_pair_batch_matches_the_reference_tokenizer(tiny_checkpoint, shared_file,
                                                         reference_file):
    """[CLS] a [SEP] b [SEP] with ids from google-research/bert's own tokenizer."""
    shared_file("glue", "MRPC", "dev.tsv")
    reference = {}
    with open(reference_file("tokenizer_uncased.jsonl"), encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            reference[record["text"]] = record["ids"]
    task = _task("glue_mrpc", tiny_checkpoint)
    table = task._graph_table(task._table("dev"))
    inputs, labels = task.make_batch(table, tf.constant([0, 1, 2], tf.int64))
    examples = task.examples("dev")[:3]
    lengths = []
    for row, example in enumerate(examples):
        ids_a, ids_b = reference[example.text_a], reference[example.text_b]
        expected = [101] + ids_a + [102] + ids_b + [102]  # [CLS]=101, [SEP]=102
        lengths.append(len(expected))
        got = inputs["token_ids"][row].numpy().tolist()
        assert got[:len(expected)] == expected
        assert set(got[len(expected):]) <= {0}
        segments = inputs["segment_ids"][row].numpy().tolist()
        assert segments[:len(expected)] == [0] * (len(ids_a) + 2) + [1] * (len(ids_b) + 1)
    # Dynamic padding: the batch is cut to its longest sequence rounded up to 8.
    assert inputs["token_ids"].shape[1] == math.ceil(max(lengths) / 8) * 8
    assert labels["label"].numpy().tolist() == [int(e.label) for e in examples]


def test_without_dynamic_padding_batches_keep_max_seq_length(tiny_checkpoint):
    task = _task("glue_sst2", tiny_checkpoint, **{"data.dynamic_padding": False,
                                                   "data.max_seq_length": 48})
    inputs, _ = task.make_batch(task._graph_table(task._table("dev")),
                                tf.constant([0, 1], tf.int64))
    assert inputs["token_ids"].shape == (2, 48)


def test_train_order_is_a_seeded_permutation_per_epoch(tiny_checkpoint):
    task = _task("glue_sst2", tiny_checkpoint, **{"data.max_train_examples": 12})
    seen = []
    task.make_batch = lambda table, indices: indices
    for indices in task.train_dataset(None, 4).take(6):
        seen.extend(indices.numpy().tolist())
    first, second = seen[:12], seen[12:]
    assert sorted(first) == list(range(12)) and sorted(second) == list(range(12))
    assert first != second  # reshuffled every epoch
    again = []
    for indices in task.train_dataset(None, 4).take(3):
        again.extend(indices.numpy().tolist())
    assert again == first  # same seed, same order


def test_ner_labels_sit_on_the_first_piece_of_each_word(tiny_checkpoint, tmp_path):
    from bert_tf.tasks.ner import LABELS

    conll = tmp_path / "sample.conll"
    conll.write_text("-DOCSTART- -X- -X- O\n\nHuckleberry NNP B-NP I-PER\n"
                     "visits VBZ B-VP O\nU.S. NNP B-NP I-LOC\n\n")
    task = _task("ner_conll2003", tiny_checkpoint, **{"data.train_file": str(conll),
                                                       "data.max_seq_length": 16})
    # "Huckleberry" is three pieces in the uncased vocab: hu ##ckle ##berry.
    table = task._table("train")
    ids = table["token_ids"][0].tolist()
    pieces = [task.tokenizer.vocab[i] for i in ids if i]
    assert pieces == ["[CLS]", "hu", "##ckle", "##berry", "visits", "u", ".", "s", ".",
                      "[SEP]"]
    assert task._word_positions["train"] == [[1, 4, 5]]
    weights = table["label_weights"][0]
    assert np.flatnonzero(weights).tolist() == [1, 4, 5]
    # IOB1 file tags become IOB2 training labels.
    assert [LABELS[i] for i in table["label_ids"][0][[1, 4, 5]]] == [
        "B-PER", "O", "B-LOC"]


def test_ner_words_past_max_seq_length_are_predicted_outside(tiny_checkpoint):
    from bert_tf.data.conll2003 import ConllSentence, featurize

    task = _task("ner_conll2003", tiny_checkpoint)
    sentence = ConllSentence(tuple(["word"] * 10), tuple(["O"] * 10), 0)
    features = featurize([sentence], task.tokenizer, 6, [sentence.labels])
    # [CLS] + 4 words + [SEP] fit; the other 6 words get no position.
    assert features.word_positions == [[1, 2, 3, 4, -1, -1, -1, -1, -1, -1]]


def test_swag_batch_has_four_context_ending_pairs(tiny_checkpoint, shared_file):
    sample = shared_file("swag", "swag_sample_hf_format.jsonl")
    task = _task("swag", tiny_checkpoint, **{"data.train_file": sample,
                                             "data.eval_file": sample})
    inputs, labels = task.make_batch(task._graph_table(task._table(sample)),
                                     tf.constant([0, 1], tf.int64))
    assert inputs["token_ids"].shape[:2] == (2, 4)
    example = task.examples(sample)[1]
    for choice in range(4):
        ids = [i for i in inputs["token_ids"][1, choice].numpy().tolist() if i]
        text = task.tokenizer.detokenize(tf.constant([ids])).numpy()[0].decode()
        context = task.tokenizer.detokenize(
            task.tokenizer.tokenize(tf.constant([example.context]))).numpy()[0].decode()
        ending = task.tokenizer.detokenize(task.tokenizer.tokenize(tf.constant(
            [f"{example.start_phrase} {example.endings[choice]}"]))).numpy()[0].decode()
        assert text == f"[CLS] {context} [SEP] {ending} [SEP]"
    assert labels["label"].numpy().tolist() == [e.label for e in task.examples(sample)[:2]]


# -- whole runs ----------------------------------------------------------------


@pytest.mark.slow
def test_glue_train_evaluate_predict(tiny_checkpoint, tmp_path, shared_file, capsys):
    shared_file("glue", "SST-2", "train.tsv")
    model_dir = tmp_path / "sst2"
    code = finetune("glue_sst2", model_dir, tiny_checkpoint, **{
        "data.max_train_examples": 80, "data.max_eval_examples": 40,
        "trainer.train_epochs": 2, "trainer.global_batch_size": 16})
    assert code == 0
    params = _params(model_dir)
    # 2 epochs of 80 examples at batch 16; warmup is 10 % of that.
    assert params["trainer"]["train_steps"] == 10
    assert params["model"]["encoder"]["hidden_size"] == 32
    metadata = json.loads((model_dir / "bert_tf_model.json").read_text())
    assert metadata["task"]["kind"] == "classifier"
    assert metadata["task"]["label_names"] == ["0", "1"]

    metrics = evaluate_run(str(model_dir))
    assert set(metrics) == {"accuracy"} and 0.0 <= metrics["accuracy"] <= 1.0
    # The command prints the same metric (its main() in this process: a subprocess would
    # add a TensorFlow import; tests/test_main.py runs the module as `__main__`).
    capsys.readouterr()
    assert evaluate.main(["--model_dir", str(model_dir)]) == 0
    printed = capsys.readouterr()
    assert f"accuracy {metrics['accuracy']:.4f}" in printed.out, printed.err[-2000:]

    # The run's model_dir exports as is; the export's logits on raw text are
    # the trained model's on the task's own batches.
    from bert_tf.export import export_model_dir, load_export

    exported = load_export(export_model_dir(str(model_dir), str(tmp_path / "exports")))
    task, model, _ = load_run(str(model_dir))
    inputs, _ = task.make_batch(task._graph_table(task._table("dev")),
                                tf.range(4, dtype=tf.int64))
    expected = model(inputs, training=False)["logits"].numpy()
    texts = [example.text_a for example in task.examples("dev")[:4]]
    np.testing.assert_allclose(exported.predict(texts)["logits"], expected, atol=1e-5)
    out = tmp_path / "predictions"
    assert predict.main(["--model_dir", str(model_dir), "--output_dir", str(out)]) == 0
    with open(out / "SST-2.tsv", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t"))
    assert rows[0] == ["index", "prediction"] and len(rows) == 41
    assert {row[1] for row in rows[1:]} <= {"0", "1"}


@pytest.mark.slow
def test_stsb_regression_reports_correlations(tiny_checkpoint, tmp_path, shared_file):
    shared_file("glue", "STS-B", "train.tsv")
    code = finetune("glue_stsb", tmp_path / "stsb", tiny_checkpoint, **{
        "data.max_train_examples": 64, "data.max_eval_examples": 48,
        "trainer.train_epochs": 1, "trainer.global_batch_size": 16})
    assert code == 0
    metrics = evaluate_run(str(tmp_path / "stsb"))
    assert set(metrics) == {"pearson", "spearman"}
    assert all(-1.0 <= value <= 1.0 for value in metrics.values())
    # The same command again resumes (here: finds the run complete), although
    # the run now reads the vocabulary copied into its own directory.
    assert finetune("glue_stsb", tmp_path / "stsb", tiny_checkpoint, **{
        "data.max_train_examples": 64, "data.max_eval_examples": 48,
        "trainer.train_epochs": 1, "trainer.global_batch_size": 16}) == 0


@pytest.mark.slow
def test_ner_train_and_conlleval_files(tiny_checkpoint, tmp_path, shared_file):
    testa = shared_file("conll2003", "eng.testa")
    code = finetune("ner_conll2003", tmp_path / "ner", tiny_checkpoint, **{
        "data.max_train_examples": 64, "data.max_eval_examples": 30,
        "data.eval_files": f"[{testa}]", "trainer.train_epochs": 1,
        "trainer.global_batch_size": 16})
    assert code == 0
    out = tmp_path / "out"
    metrics = evaluate_run(str(tmp_path / "ner"), [testa], str(out))
    assert {"f1", "precision", "recall", "accuracy"} <= set(metrics)
    lines = (out / "predictions_eng.testa.txt").read_text().split("\n")
    from bert_tf.data.conll2003 import read_conll

    gold = read_conll(testa)[:30]
    rows = [line.split(" ") for line in lines if line]
    assert len(rows) == sum(len(s.words) for s in gold)
    assert [r[0] for r in rows] == [w for s in gold for w in s.words]


@pytest.mark.slow
def test_squad_train_and_predictions_json(tiny_checkpoint, tmp_path, shared_file):
    dev = shared_file("squad", "dev-v1.1.json")
    code = finetune("squad_v1", tmp_path / "squad", tiny_checkpoint, **{
        "data.train_file": dev, "data.eval_file": dev, "data.train_articles": "even",
        "data.eval_articles": "odd", "data.max_seq_length": 128, "data.doc_stride": 64,
        "data.max_train_examples": 32, "data.max_eval_examples": 24,
        "trainer.train_epochs": 1, "trainer.global_batch_size": 16})
    assert code == 0
    out = tmp_path / "out"
    metrics = evaluate_run(str(tmp_path / "squad"), None, str(out))
    assert {"exact_match", "f1"} <= set(metrics)
    predictions = json.loads((out / "predictions.json").read_text())
    from bert_tf.data.squad_reader import split_by_article

    odd = split_by_article(dev, lambda i: i % 2 == 1)[:24]
    assert sorted(predictions) == sorted(e.qas_id for e in odd)
    # Answers are substrings of their contexts (original text, not word pieces).
    contexts = {e.qas_id: e.context for e in odd}
    assert all(answer in contexts[qid] for qid, answer in predictions.items())


@pytest.mark.slow
def test_swag_train_and_evaluate(tiny_checkpoint, tmp_path, shared_file):
    sample = shared_file("swag", "swag_sample_hf_format.jsonl")
    code = finetune("swag", tmp_path / "swag", tiny_checkpoint, **{
        "data.train_file": sample, "data.eval_file": sample,
        "trainer.train_epochs": 1, "trainer.global_batch_size": 4})
    assert code == 0
    out = tmp_path / "out"
    metrics = evaluate_run(str(tmp_path / "swag"), None, str(out))
    assert set(metrics) == {"accuracy"}
    rows = [json.loads(line) for line in
            (out / "predictions_swag_sample_hf_format.jsonl").read_text().splitlines()]
    assert len(rows) == 10
    assert all(abs(sum(row["probabilities"]) - 1.0) < 1e-4 for row in rows)


def test_source_names_keep_conll_file_names_apart():
    from bert_tf.tasks.finetuning import source_name

    assert source_name("/data/conll2003/eng.testa") == "eng.testa"
    assert source_name("/data/conll2003/eng.testb") == "eng.testb"
    assert source_name("/data/squad/dev-v1.1.json") == "dev-v1.1"
    assert source_name("dev_matched") == "dev_matched"
