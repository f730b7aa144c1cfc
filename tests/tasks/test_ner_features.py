"""The feature-based NER task (paper section 5.3): train, evaluate, export, serve."""

import pytest
from finetune_helpers import finetune

from bert_tf.tasks.ner import LABELS


@pytest.mark.slow
def test_feature_based_ner_trains_evaluates_and_keeps_the_encoder_frozen(tiny_checkpoint,
                                                                         tmp_path):
    model_dir = tmp_path / "ner_features"
    code = finetune("ner_conll2003_features", model_dir, tiny_checkpoint, **{
        "data.max_train_examples": 64, "data.max_eval_examples": 32,
        "trainer.train_epochs": 1, "trainer.global_batch_size": 8,
        "model.lstm_units": 8, "model.feature_mix": "sum_all"})
    assert code == 0
    assert (model_dir / "eval_results.json").exists()
    # The encoder was frozen: the run's encoder is the checkpoint's, weight for weight.
    import numpy as np

    import bert_tf

    trained, initial = bert_tf.load_encoder(str(model_dir)), bert_tf.load_encoder(tiny_checkpoint)
    assert len(trained.weights) == len(initial.weights)
    for after, before in zip(trained.weights, initial.weights):
        np.testing.assert_array_equal(np.asarray(after), np.asarray(before))

    # Exported like any tagger: raw text in, one tag per word out, in a fresh loader.
    import tensorflow as tf

    from bert_tf.export.__main__ import main as export_main

    assert export_main(["--model_dir", str(model_dir), "--export_dir",
                        str(tmp_path / "export")]) == 0
    (version,) = (tmp_path / "export").iterdir()
    loaded = tf.saved_model.load(str(version))
    out = loaded.signatures["serving_default"](text=tf.constant(["EU rejects German call ."]))
    words = [w.decode() for w in out["words"].numpy()[0] if w]
    assert words == ["EU", "rejects", "German", "call", "."]
    assert all(label.decode() in LABELS for label in out["labels"].numpy()[0][:5])


def test_a_mix_deeper_than_the_encoder_is_a_clear_error(tiny_checkpoint, tmp_path, capsys):
    # The tiny encoder has 2 layers; the last four do not exist.
    code = finetune("ner_conll2003_features", tmp_path / "run", tiny_checkpoint, **{
        "data.max_train_examples": 8, "model.feature_mix": "concat_last_four"})
    assert code == 1
    error = capsys.readouterr().err
    assert "model.feature_mix 'concat_last_four' needs an encoder of at least 4 layers" in error
    assert "this one has 2" in error
    assert not (tmp_path / "run" / "checkpoint").exists()
