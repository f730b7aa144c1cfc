"""What one `Trainer.train` call's loop holds open, and what it has seen so far."""

import dataclasses

from bert_tf.training.heap_release import HeapRelease
from bert_tf.training.profiler import ProfilerRange
from bert_tf.training.progress import Progress
from bert_tf.training.signals import StopOnSignal
from bert_tf.training.summaries import SummaryWriters


@dataclasses.dataclass
class LoopState:
    """The resources a training loop opens and closes together, and its running state.

    Attributes:
      writers: the TensorBoard writers (`train/`, `eval/`).
      progress: the console's progress line.
      signals: the SIGTERM / SIGINT watch, which bounds the wait for a step boundary.
      preemption: TensorFlow's `PreemptionCheckpointHandler` (multi-worker and TPU
        runs), or None.
      profiler: the `trainer.profile_steps` trace.
      release_heap: hands freed heap memory back to the OS (see `heap_release`).
      first_loop: the next loop is this process's first (its first step traces).
      reported_step: the step whose progress the first loop reported already.
      evaluated: this call evaluated already (the first evaluation traces).
      train_metrics: the metrics of the newest loop.
      eval_metrics: the newest evaluation's metrics.
    """

    writers: SummaryWriters
    progress: Progress
    signals: StopOnSignal
    preemption: object
    profiler: ProfilerRange
    release_heap: HeapRelease = dataclasses.field(default_factory=HeapRelease)
    first_loop: bool = True
    reported_step: int | None = None
    evaluated: bool = False
    train_metrics: dict = dataclasses.field(default_factory=dict)
    eval_metrics: dict = dataclasses.field(default_factory=dict)

    def close(self) -> None:
        """Ends the progress line, the trace, the signal watch and the writers."""
        self.progress.finish()
        self.profiler.close()
        self.signals.close()
        self.writers.close()
