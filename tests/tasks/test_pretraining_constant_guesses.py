"""The held-out floor: what always giving one answer scores on the evaluated batches."""

import pytest
import tensorflow as tf

from bert_tf.tasks.pretraining import PretrainingTask

BATCH, STEPS = 8, 3


@pytest.fixture
def experiment(pretraining_experiment):
    return pretraining_experiment


def _constant_answer_accuracies(task, batches, mlm_token, nsp_label):
    """The task's own held-out metrics for a model that always gives these answers."""
    sums = {}
    for inputs, labels in batches:
        predictions = labels["masked_lm_weights"].shape
        outputs = {"mlm_logits": tf.one_hot(tf.fill(predictions, mlm_token), 30522),
                   "nsp_logits": tf.one_hot(
                       tf.fill(tf.shape(labels["next_sentence_labels"]), nsp_label), 2)}
        for key, value in task.metric_sums(labels, outputs, inputs).items():
            sums[key] = sums.get(key, 0.0) + float(value)
    return task.metrics(sums)


# Tens of seconds: two input pipelines over the real corpus.
@pytest.mark.long
def test_the_guess_scores_what_the_metrics_give_a_constant_model_and_nothing_beats_it(
        experiment):
    task = PretrainingTask(experiment)
    guesses = task.constant_guesses(BATCH, STEPS)
    mlm, nsp = guesses["mlm_accuracy"], guesses["nsp_accuracy"]
    batches = list(task.eval_dataset(None, BATCH).take(STEPS))
    scored = _constant_answer_accuracies(task, batches, mlm.label, nsp.label)
    assert scored["mlm_accuracy"] == pytest.approx(mlm.accuracy, abs=1e-9)
    assert scored["nsp_accuracy"] == pytest.approx(nsp.accuracy, abs=1e-9)
    assert 0.02 < mlm.accuracy < 0.2 and 0.5 <= nsp.accuracy < 0.8
    # Other frequent tokens ("the", ",", ".", "of", "and") and the other NSP answer score no
    # more; the two NSP answers split the counted (non-empty) slots of packed rows.
    for token in {1996, 1010, 1012, 1997, 1998} - {mlm.label}:
        other = _constant_answer_accuracies(task, batches, token, 1 - nsp.label)
        assert other["mlm_accuracy"] <= mlm.accuracy
        assert other["nsp_accuracy"] == pytest.approx(1 - nsp.accuracy, abs=1e-9)


def _batches_of(labels):
    """A stand-in held-out dataset: one batch holding these labels (no inputs needed)."""
    return lambda input_context, batch_size: tf.data.Dataset.from_tensors(({}, labels))


def test_only_weighted_labels_count(experiment, monkeypatch):
    task = PretrainingTask(experiment)
    # Token 9 is the most frequent id, but three of its five are padding slots (weight 0);
    # token 7 fills three of the six real slots. Packed NSP: two slots empty.
    labels = {"masked_lm_ids": tf.constant([[9, 9, 9, 7, 7], [9, 9, 7, 4, 0]]),
              "masked_lm_weights": tf.constant([[0., 0., 0., 1., 1.], [1., 1., 1., 1., 0.]]),
              "next_sentence_labels": tf.constant([[1, 1, 0], [1, 1, 1]]),
              "next_sentence_weights": tf.constant([[0., 0., 1.], [1., 1., 1.]])}
    monkeypatch.setattr(task, "eval_dataset", _batches_of(labels))
    guesses = task.constant_guesses(batch_size=2, steps=1)
    assert (guesses["mlm_accuracy"].label, guesses["mlm_accuracy"].accuracy) == (7, 0.5)
    assert (guesses["nsp_accuracy"].label, guesses["nsp_accuracy"].accuracy) == (1, 0.75)
    # Rows without packing: one NSP label per row, all counted; no NSP, no NSP guess.
    del labels["next_sentence_weights"]
    labels["next_sentence_labels"] = tf.constant([0, 0])
    assert task.constant_guesses(2, 1)["nsp_accuracy"].accuracy == 1.0
    del labels["next_sentence_labels"]
    assert set(task.constant_guesses(2, 1)) == {"mlm_accuracy"}
