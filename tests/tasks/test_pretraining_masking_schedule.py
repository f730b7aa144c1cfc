"""The pretraining config's masking schedule and held-out seed (`data.masked_lm_prob_end`,
`data.masked_lm_prob_steps`, `data.eval_seed`)."""

import dataclasses

import pytest

from bert_tf.data import pretraining as pretraining_data
from bert_tf.tasks import pretraining
from bert_tf.tasks.pretraining import PretrainingTask


def _with(experiment, trainer=None, **data):
    experiment = dataclasses.replace(experiment,
                                     data=dataclasses.replace(experiment.data, **data))
    if trainer:
        experiment = dataclasses.replace(
            experiment, trainer=dataclasses.replace(experiment.trainer, **trainer))
    return experiment


def test_the_default_config_has_no_schedule_and_evaluates_as_before(pretraining_experiment):
    data = pretraining_experiment.data
    assert (data.masked_lm_prob_end, data.masked_lm_prob_steps, data.eval_seed) == (0.0, 0, None)
    assert pretraining.masking_schedule(data, 100) is None
    task = PretrainingTask(pretraining_experiment)
    assert task.eval_settings() == (32, 5, 0.15) and task.eval_seed == data.seed + 1


def test_the_schedule_runs_over_the_training_steps_unless_given_its_own(pretraining_experiment):
    data = _with(pretraining_experiment, masked_lm_prob=0.3, masked_lm_prob_end=0.15).data
    assert pretraining.masking_schedule(data, 1600) == pretraining_data.MaskingSchedule(
        start=0.3, end=0.15, steps=1600)
    own = dataclasses.replace(data, masked_lm_prob_steps=400)
    assert pretraining.masking_schedule(own, 1600).steps == 400
    assert pretraining.training_masked_lm_prob_max(data) == 0.3


def test_evaluation_is_at_a_fixed_rate_whatever_the_schedule(pretraining_experiment):
    scheduled = _with(pretraining_experiment, masked_lm_prob=0.3, max_predictions_per_seq=10,
                      masked_lm_prob_end=0.15)
    # Unset: the rate training ends at; set: the given one.
    assert PretrainingTask(scheduled).eval_settings()[2] == 0.15
    given = _with(scheduled, eval_masked_lm_prob=0.2)
    assert PretrainingTask(given).eval_settings()[2] == 0.2


def test_the_held_out_seed_may_be_fixed_apart_from_the_data_seed(pretraining_experiment):
    other_data_seed = _with(pretraining_experiment, seed=7, eval_seed=1)
    task = PretrainingTask(other_data_seed)
    assert task.eval_seed == 1
    # The held-out seed changes no training batch: a resumed run may set it.
    assert task.input_differences(pretraining_experiment,
                                  _with(pretraining_experiment, eval_seed=4)) == {}


def test_a_schedule_over_the_run_ties_its_batches_to_the_step_count(pretraining_experiment):
    scheduled = _with(pretraining_experiment, masked_lm_prob=0.3, masked_lm_prob_end=0.15)
    task = PretrainingTask(scheduled)
    longer = _with(scheduled, trainer={"train_steps": scheduled.trainer.train_steps + 10})
    assert task.input_differences(scheduled, longer) == {
        "trainer.train_steps": (scheduled.trainer.train_steps, longer.trainer.train_steps)}
    # A schedule of its own length, or none, does not depend on the step count.
    own = _with(scheduled, masked_lm_prob_steps=50)
    own_longer = _with(own, trainer={"train_steps": own.trainer.train_steps + 10})
    assert task.input_differences(own, own_longer) == {}
    plain_longer = _with(pretraining_experiment,
                         trainer={"train_steps": pretraining_experiment.trainer.train_steps + 1})
    assert task.input_differences(pretraining_experiment, plain_longer) == {}


@pytest.mark.parametrize("data, message", [
    ({"masked_lm_prob_end": 1.0}, "data.masked_lm_prob_end must be in [0, 1) (0: no schedule)"),
    ({"masked_lm_prob_end": -0.1}, "data.masked_lm_prob_end must be in [0, 1)"),
    ({"masked_lm_prob_end": 0.15, "masked_lm_prob_steps": -1},
     "data.masked_lm_prob_steps must be >= 0"),
    ({"masked_lm_prob_steps": 100}, "data.masked_lm_prob_steps is set but "
                                    "data.masked_lm_prob_end is 0"),
])
def test_bad_schedules_are_named(pretraining_experiment, data, message):
    with pytest.raises(ValueError) as raised:
        PretrainingTask(_with(pretraining_experiment, **data)).validate()
    assert message in str(raised.value)
