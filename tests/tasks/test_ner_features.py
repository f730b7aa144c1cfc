"""The feature-based NER task (paper section 5.3): train, evaluate, predict, export, serve."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import bert_tf
from bert_tf import evaluate, predict
from bert_tf.data.conll2003 import read_conll
from bert_tf.tasks.conll_metrics import to_iob1, to_iob2
from bert_tf.tasks.ner import LABELS
from tests.finetune_helpers import REPO, finetune

FRESH_PROCESS_PREDICT = os.path.join(REPO, "tests", "export", "fresh_process_predict.py")


@pytest.mark.slow
@pytest.mark.long
def test_feature_based_ner_trains_evaluates_predicts_exports_and_serves(
        tiny_checkpoint, tmp_path, shared_file, capsys):
    model_dir = tmp_path / "ner_features"
    code = finetune("ner_conll2003_features", model_dir, tiny_checkpoint, **{
        "data.max_train_examples": 64, "data.max_eval_examples": 32,
        "trainer.train_epochs": 1, "trainer.global_batch_size": 8,
        "model.lstm_units": 8, "model.feature_mix": "sum_all"})
    assert code == 0
    assert (model_dir / "eval_results.json").exists()
    # The encoder was frozen: the run's encoder is the checkpoint's, weight for weight.
    trained, initial = bert_tf.load_encoder(str(model_dir)), bert_tf.load_encoder(tiny_checkpoint)
    assert len(trained.weights) == len(initial.weights)
    for after, before in zip(trained.weights, initial.weights):
        np.testing.assert_array_equal(np.asarray(after), np.asarray(before))

    # Evaluated and predicted by the commands every task uses.
    testa = shared_file("conll2003", "eng.testa")
    limit = "data.max_eval_examples=12"
    assert evaluate.main(["--model_dir", str(model_dir), "--input_file", testa,
                          "--set", limit]) == 0
    assert "f1 " in capsys.readouterr().out
    predictions = tmp_path / "predictions"
    assert predict.main(["--model_dir", str(model_dir), "--input_file", testa,
                         "--set", limit, "--output_dir", str(predictions)]) == 0
    rows = [line.split(" ") for line in
            (predictions / "predictions_eng.testa.txt").read_text().split("\n") if line]
    sentences = read_conll(testa)[:12]
    assert [row[0] for row in rows] == [word for s in sentences for word in s.words]
    predicted, at = [], 0
    for sentence in sentences:
        predicted.append([row[2] for row in rows[at:at + len(sentence.words)]])
        at += len(sentence.words)

    # Exported like any tagger, and served from a fresh process that imports only
    # TensorFlow: raw text in, one tag per word out, the tags `predict` wrote.
    from bert_tf.export.__main__ import main as export_main

    assert export_main(["--model_dir", str(model_dir), "--export_dir",
                        str(tmp_path / "export")]) == 0
    (version,) = (tmp_path / "export").iterdir()
    texts = [" ".join(s.words) for s in sentences]
    request = tmp_path / "request.json"
    request.write_text(json.dumps({"exports": {"tagger": str(version)},
                                   "inputs": {"tagger": {"text": texts}},
                                   "empty": {"tagger": {"text": [0]}}}))
    run = subprocess.run([sys.executable, FRESH_PROCESS_PREDICT, str(request)],
                         capture_output=True, text=True, timeout=600,
                         env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert run.returncode == 0, run.stderr[-3000:]
    served = json.loads(run.stdout.strip().splitlines()[-1])
    assert served["modules"] == []
    same_words = 0
    for words, labels, sentence, tags in zip(served["tagger"]["words"],
                                             served["tagger"]["labels"], sentences, predicted):
        words = [w for w in words if w]
        assert all(label in LABELS for label in labels[:len(words)])
        # The export splits raw text itself: where it finds CoNLL's words, the tags agree
        # (the export serves the model's tags; `predict` writes them in the files' IOB1).
        if words == list(sentence.words):
            same_words += 1
            assert to_iob1(to_iob2(labels[:len(words)])) == tags
    assert same_words >= 6


def test_a_mix_deeper_than_the_encoder_is_a_clear_error(tiny_checkpoint, tmp_path, capsys):
    # The tiny encoder has 2 layers; the last four do not exist.
    code = finetune("ner_conll2003_features", tmp_path / "run", tiny_checkpoint, **{
        "data.max_train_examples": 8, "model.feature_mix": "concat_last_four"})
    assert code == 1
    error = capsys.readouterr().err
    assert "model.feature_mix 'concat_last_four' needs an encoder of at least 4 layers" in error
    assert "this one has 2" in error
    assert not (tmp_path / "run" / "checkpoint").exists()
