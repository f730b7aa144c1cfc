"""Steps with a non-finite loss or gradients: never checkpointed; too many stop the run.

The train step skips the update of a non-finite step and counts such steps
in a row. Weights after one are not known to be good, so no checkpoint is
written over the last good one; after `trainer.max_consecutive_nonfinite`
of them the run is rolled back to that checkpoint and stopped.
"""

import logging

from bert_tf.training.checkpointing import NonFiniteWeightsError


class TrainingDivergedError(RuntimeError):
    """Repeated non-finite steps: the run was rolled back and stopped."""


class DivergenceGuard:
    """Checkpoints only good weights; rolls back and stops a run that keeps diverging.

    Args:
      checkpoint: the run's `TrainingCheckpoint`.
      step: the global step variable.
      consecutive_nonfinite: the train step's count of non-finite steps in a row.
      max_consecutive: `trainer.max_consecutive_nonfinite`.
    """

    def __init__(self, checkpoint, step, consecutive_nonfinite, max_consecutive: int):
        self.checkpoint = checkpoint
        self.step = step
        self.consecutive_nonfinite = consecutive_nonfinite
        self.max_consecutive = max_consecutive

    def check(self, step: int) -> int:
        """The number of non-finite steps in a row up to `step`.

        Raises:
          TrainingDivergedError: there were `max_consecutive` of them (the last
            checkpoint is restored first).
        """
        failures = int(self.consecutive_nonfinite.numpy())
        if failures >= self.max_consecutive:
            self._roll_back(f"{failures} consecutive steps up to step {step} had a "
                            "non-finite loss or gradients (their updates were skipped)")
        return failures

    def save(self, step: int, failures: int) -> None:
        """Writes `step`'s checkpoint, unless its newest steps or its weights are non-finite.

        Args:
          step: the current step.
          failures: `check(step)`.

        Raises:
          TrainingDivergedError: the weights hold NaN or Inf (rolled back).
        """
        if failures:
            # The newest step was skipped as non-finite: these weights are not known
            # to be good, so keep the last checkpoint.
            logging.warning("not checkpointing step %d: the last %d step(s) had a "
                            "non-finite loss or gradients", step, failures)
            return
        try:
            self.checkpoint.save()
        except NonFiniteWeightsError as e:
            self._roll_back(str(e))

    def _roll_back(self, reason):
        latest = self.checkpoint.restore_latest()
        where = (f"rolled back to {latest} (step {int(self.step.numpy())})" if latest
                 else "no checkpoint was written")
        raise TrainingDivergedError(
            f"{reason}; {where} and stopped. Lower optimizer.learning_rate, enable "
            "gradient clipping (optimizer.clip_norm) or check the data.")
