"""Held-out evaluation at fixed settings (`data.eval_*`) whatever the training settings."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.tasks.pretraining import PretrainingTask


@pytest.fixture
def experiment(pretraining_experiment):
    return pretraining_experiment


def _with_data(experiment, **data):
    return dataclasses.replace(experiment, data=dataclasses.replace(experiment.data, **data))


def _eval_batches(experiment, steps=2):
    task = PretrainingTask(experiment)
    task.validate()
    batches = list(task.eval_dataset(None, 4).take(steps))
    return [tf.nest.map_structure(lambda t: t.numpy(), batch) for batch in batches]


# Tens of seconds on 2 cores: it builds three pipelines over the real corpus.
@pytest.mark.long
def test_evaluation_uses_the_eval_settings_and_training_its_own(experiment):
    # Trained at length 16 and 40 % masking, evaluated at the default recipe's 32 and 15 %.
    recipe = _with_data(experiment, max_seq_length=16, masked_lm_prob=0.4,
                        max_predictions_per_seq=7, eval_max_seq_length=32,
                        eval_max_predictions_per_seq=5, eval_masked_lm_prob=0.15)
    task = PretrainingTask(recipe)
    task.validate()
    (train_inputs, _), = task.train_dataset(None, 4).take(1)
    assert train_inputs["token_ids"].shape[1] == 16
    evaluated = _eval_batches(recipe)
    reference = _eval_batches(experiment)
    assert evaluated[0][0]["token_ids"].shape[1] == 32
    # The very batches (tokens, masks, labels) the default recipe evaluates on.
    for (inputs, labels), (ref_inputs, ref_labels) in zip(evaluated, reference):
        for name in ref_inputs:
            np.testing.assert_array_equal(inputs[name], ref_inputs[name])
        for name in ref_labels:
            np.testing.assert_array_equal(labels[name], ref_labels[name])


def test_unset_eval_settings_are_the_training_ones(experiment):
    task = PretrainingTask(_with_data(experiment, masked_lm_prob=0.3))
    assert task.eval_settings() == (32, 5, 0.3)


def test_eval_settings_change_no_training_batch(experiment):
    task = PretrainingTask(experiment)
    changed = _with_data(experiment, eval_max_seq_length=64, eval_masked_lm_prob=0.2)
    assert task.input_differences(experiment, changed) == {}


@pytest.mark.parametrize("data, message", [
    ({"eval_max_seq_length": 128}, "data.eval_max_seq_length (128) exceeds "
                                   "model.encoder.max_position_embeddings (64)"),
    ({"eval_max_predictions_per_seq": 40}, "data.eval_max_predictions_per_seq (40) exceeds"),
    ({"eval_masked_lm_prob": 1.5}, "data.eval_masked_lm_prob must be in [0, 1]"),
    ({"eval_max_seq_length": -1}, "data.eval_max_seq_length must be >= 0"),
])
def test_bad_eval_settings_are_named(experiment, data, message):
    with pytest.raises(ValueError) as raised:
        PretrainingTask(_with_data(experiment, **data)).validate()
    assert message in str(raised.value)
