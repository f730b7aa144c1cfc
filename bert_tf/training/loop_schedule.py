"""Where the training loop's loops end, and which of their boundaries checkpoint or evaluate.

A loop runs up to `trainer.steps_per_loop` steps in one `tf.function` call.
It also ends on every multiple of `checkpoint_every` and `eval_every` and on
the profiler's steps, so those need not be multiples of `steps_per_loop`.
Every evaluation step is a checkpoint step too (an evaluation that fails must
not cost the steps before it), and the last step evaluates.
"""

from bert_tf.training.trainer_config import TrainerConfig


class LoopSchedule:
    """The loop boundaries, checkpoint steps and evaluation steps of a run.

    Args:
      config: the run's `TrainerConfig`.
    """

    def __init__(self, config: TrainerConfig):
        self.config = config

    def next_boundary(self, step: int) -> int:
        """The step the loop starting after `step` ends at."""
        config = self.config
        boundary = min(step + config.steps_per_loop, config.train_steps)
        for every in (config.checkpoint_every, config.eval_every):
            if every:
                boundary = min(boundary, (step // every + 1) * every)
        for profile_step in config.profile_steps:
            if profile_step > step:
                boundary = min(boundary, profile_step)
        return boundary

    def evaluates_at(self, step: int) -> bool:
        """Whether the model is evaluated (after a checkpoint) at `step`."""
        config = self.config
        return step == config.train_steps or bool(config.eval_every
                                                  and step % config.eval_every == 0)

    def checkpoints_at(self, step: int) -> bool:
        """Whether `step` is a `checkpoint_every` step (evaluation steps checkpoint too)."""
        return step % self.config.checkpoint_every == 0
