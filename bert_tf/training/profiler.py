"""TensorFlow's profiler over the steps `trainer.profile_steps` names, on the chief."""

import tensorflow as tf


class ProfilerRange:
    """Traces the loops from step `first` until one reaches step `last` of `[first, last]`.

    Loops end on both steps (`LoopSchedule.next_boundary`), so the trace holds
    exactly those steps.

    Args:
      profile_steps: `[first, last]` global steps, or empty for no trace.
      logdir: where the trace goes (the run's `train/` summaries, for TensorBoard).
      chief: only the chief traces.
    """

    def __init__(self, profile_steps, logdir: str, chief: bool):
        self._steps = tuple(profile_steps) if chief else ()
        self._logdir = logdir
        self._tracing = False

    def loop_starts(self, step: int) -> None:
        """Starts the trace when the loop after `step` is the first to trace."""
        if self._steps and step == self._steps[0]:
            tf.profiler.experimental.start(self._logdir)
            self._tracing = True

    def loop_ended(self, step: int) -> None:
        """Stops the trace once a loop reached the last step."""
        if self._tracing and step >= self._steps[1]:
            self.close()

    def close(self) -> None:
        """Stops a trace still running (the run ended or failed inside the range)."""
        if self._tracing:
            tf.profiler.experimental.stop()
            self._tracing = False
