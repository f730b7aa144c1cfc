"""Where loops end and which steps checkpoint and evaluate (pure: no TensorFlow runs)."""

from bert_tf.training.loop_schedule import LoopSchedule
from bert_tf.training.trainer_config import TrainerConfig


def schedule(**values):
    return LoopSchedule(TrainerConfig(**values))


def boundaries(loop_schedule):
    steps, step = [], 0
    while step < loop_schedule.config.train_steps:
        step = loop_schedule.next_boundary(step)
        steps.append(step)
    return steps


def test_loops_also_end_on_checkpoint_evaluation_and_profiler_steps():
    every = schedule(train_steps=25, steps_per_loop=10, checkpoint_every=4, eval_every=6,
                     profile_steps=[5, 7])
    assert boundaries(every) == [4, 5, 6, 7, 8, 12, 16, 18, 20, 24, 25]
    assert boundaries(schedule(train_steps=25, steps_per_loop=10, checkpoint_every=100,
                               eval_every=0)) == [10, 20, 25]


def test_evaluation_steps_are_every_eval_every_and_the_last_and_checkpoints_every_n():
    every = schedule(train_steps=25, checkpoint_every=4, eval_every=6)
    assert [step for step in range(1, 26) if every.evaluates_at(step)] == [6, 12, 18, 24, 25]
    assert [step for step in range(1, 26) if every.checkpoints_at(step)] == [4, 8, 12, 16, 20,
                                                                             24]
    at_the_end = schedule(train_steps=25, eval_every=0)
    assert [step for step in range(1, 26) if at_the_end.evaluates_at(step)] == [25]
