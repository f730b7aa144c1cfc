"""Console progress: a one-line bar on a terminal, plain log lines otherwise.

A run of several trainings in a row (the demo's length-64 phase, then its
length-128 one) describes itself to each phase's `Progress` with a `RunPlan`:
the bar then names the phase, and its ETA covers the whole run.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import sys
import time
from collections.abc import Callable


def _duration(seconds):
    seconds = int(max(seconds, 0))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{seconds:02d}s" if hours else f"{minutes}m{seconds:02d}s"


# Metrics shown after the loss, when the task reports them.
_SHOWN_METRICS = ("mlm_accuracy", "nsp_accuracy", "accuracy")


@dataclasses.dataclass(frozen=True)
class PhasePlan:
    """One phase of a run of several trainings, as the console shows and estimates it.

    Attributes:
      name: what tells the phase apart on the bar, e.g. `"seq 64"`.
      train_steps: its steps (`trainer.train_steps` of its experiment).
      step_cost: the cost of one of its steps relative to the other phases' (any
        unit shared by the plan's phases, e.g. a step's matmul FLOPs): a later
        phase's steps are estimated at the current phase's measured time per
        step times their cost ratio.
    """

    name: str
    train_steps: int
    step_cost: float

    def __post_init__(self):
        if self.train_steps < 0 or not self.step_cost > 0:
            raise ValueError(f"phase {self.name!r}: train_steps must be >= 0 and step_cost "
                             f"> 0, got {self.train_steps} and {self.step_cost}")


@dataclasses.dataclass(frozen=True)
class RunPlan:
    """A run's phases and the one a `Progress` reports: the contract of a multi-phase run.

    The whole-run ETA during phase `current` is

        time per step (measured) x (steps left in this phase
                                    + each later phase's steps x its step_cost / this one's)
        + one start-up per later phase, each as long as this phase's own

    where this phase's start-up is measured from `started` to the end of its
    first, traced step. A later phase builds, restores and traces the same
    kind of model through the same input pipeline, so its start-up is about
    as long; what the caller does between phases outside `Trainer.train` (the
    demo's constant-guess pass, about 10 s on 2 cores) is not counted. Steps are
    scaled by cost rather than counted alike because phases differ in batch
    and length: time per step follows the step's FLOPs far better than its
    row count.

    Args:
      phases: every phase of the run, in training order.
      current: the index in `phases` of the phase being trained.
      started: `time.monotonic()` when that phase began (before the trainer
        built anything), on the clock the `Progress` reads.
    """

    phases: tuple[PhasePlan, ...]
    current: int
    started: float

    def __post_init__(self):
        if not 0 <= self.current < len(self.phases):
            raise ValueError(f"current phase {self.current} is not one of the "
                             f"{len(self.phases)} phases")

    @property
    def phase(self) -> PhasePlan:
        """The phase being trained."""
        return self.phases[self.current]

    @property
    def label(self) -> str:
        """The bar's name for the phase: `"phase 1/2 seq 64"`, or its name when alone."""
        if len(self.phases) == 1:
            return self.phase.name
        return f"phase {self.current + 1}/{len(self.phases)} {self.phase.name}"

    def remaining_after(self, seconds_per_step: float, startup_seconds: float) -> float:
        """Seconds the phases after the current one take (see the class docstring).

        Args:
          seconds_per_step: the current phase's measured time per step.
          startup_seconds: its measured start-up, the estimate of each later phase's.
        """
        later = self.phases[self.current + 1:]
        steps = sum(p.train_steps * p.step_cost / self.phase.step_cost for p in later)
        return seconds_per_step * steps + startup_seconds * len(later)


class _LogAboveTheBar(logging.Handler):
    """Wraps a console log handler: clears the bar, writes the record, redraws the bar.

    Without it a log line written mid-run (a checkpoint, an evaluation) lands
    on the bar's line, which has no newline yet.
    """

    def __init__(self, inner, progress):
        super().__init__(inner.level)
        self.inner = inner
        self.progress = progress

    def emit(self, record):
        self.progress.clear()
        self.inner.handle(record)
        self.progress.redraw()


class Progress:
    """Reports training progress once per loop, and right after the first step.

    The first step of a process traces the train step and fills the input
    pipeline: its report says how long it took instead of a throughput, and
    the ETA is measured from it, over steps that run at full speed.

    On a terminal (`stream.isatty()`) it redraws one line that fits the
    terminal's width: the step, ETA and throughput always, then the loss and
    accuracies, then the bar, as room allows. Log records written to the
    console meanwhile appear above the bar. Otherwise (logs, CI) it writes one
    log line per report.

    With a `plan` (one phase of several), each report starts with the
    phase's label and the ETA is the whole run's (`RunPlan`); the step and
    the bar stay the phase's own.

    Args:
      first_step: the step the run starts (or resumes) at.
      total_steps: the step it ends at.
      stream: where the bar goes (default stdout).
      width: the bar's width in characters, when it fits.
      plan: the run's phases and the one this is (a plan of one phase only
        adds its name); None: a run of one training, reported without phases.
      clock: returns seconds on a monotonic clock (default `time.monotonic`).
    """

    def __init__(self, first_step: int, total_steps: int, stream=None, width: int = 24,
                 plan: RunPlan | None = None, clock: Callable[[], float] | None = None):
        self.first_step = first_step
        self.total_steps = total_steps
        self.stream = stream or sys.stdout
        isatty = getattr(self.stream, "isatty", None)
        self.interactive = bool(isatty and isatty())
        self.width = width
        self.plan = plan
        self._clock = clock or time.monotonic
        # (time, step) the ETA is measured from: the end of the first (traced) step.
        self._origin = (self._clock(), first_step)
        # The phase's start-up, from `plan.started` to the end of its first step.
        self._startup = 0.0
        self._line = ""
        self._wrapped = []
        if self.interactive:
            self._wrap_console_handlers()

    def _wrap_console_handlers(self):
        root = logging.getLogger()
        for index, handler in enumerate(root.handlers):
            if isinstance(handler, logging.StreamHandler) and _is_terminal(handler.stream):
                wrapper = _LogAboveTheBar(handler, self)
                root.handlers[index] = wrapper
                self._wrapped.append((index, handler, wrapper))

    def fields(self, step, metrics, examples_per_second=None, first_step_seconds=None):
        """[(priority, text)] of one report, in display order; lower priority drops first.

        Args:
          step: the step just finished.
          metrics: the task's metrics of the steps since the last report.
          examples_per_second: their throughput.
          first_step_seconds: set for the report of the first, traced step: its duration.
        """
        eta = self.eta(step)
        filled = int(self.width * step / max(self.total_steps, 1))
        fields = [(1, f"[{'#' * filled}{'.' * (self.width - filled)}]")]
        if self.plan is not None:
            fields.append((9, self.plan.label))
        fields += [(9, f"step {step}/{self.total_steps}"),
                  (5, f"loss {metrics.get('loss', float('nan')):.4f}")]
        fields += [(4 - i, f"{name} {metrics[name]:.4f}")
                   for i, name in enumerate(n for n in _SHOWN_METRICS if n in metrics)]
        if first_step_seconds is not None:
            fields.append((8, f"first step {first_step_seconds:.1f}s (tracing, input pipeline)"))
            return fields
        if examples_per_second is not None:
            fields.append((7, f"{examples_per_second:.1f} ex/s"))
        eta_text = f"ETA {_duration(eta)}" if eta is not None else "ETA ?"
        if self.plan is not None and len(self.plan.phases) > 1:
            eta_text += " (all phases)"
        fields.append((8, eta_text))
        return fields

    def eta(self, step: int) -> float | None:
        """Seconds until the run ends, from the steps since the first one; None before any.

        Without a plan, the steps left at the time per step measured since the
        first step; with one, also the later phases (`RunPlan`).

        Args:
          step: the step just finished.
        """
        origin_time, origin_step = self._origin
        done = step - origin_step
        if not done:
            return None
        seconds_per_step = (self._clock() - origin_time) / done
        eta = seconds_per_step * (self.total_steps - step)
        if self.plan is not None:
            eta += self.plan.remaining_after(seconds_per_step, self._startup)
        return eta

    def update(self, step, metrics, examples_per_second=None, first_step_seconds=None):
        """Reports `step` (see `fields` for the arguments)."""
        fields = self.fields(step, metrics, examples_per_second, first_step_seconds)
        if first_step_seconds is not None:
            self._origin = (self._clock(), step)
            if self.plan is not None:
                self._startup = max(self._origin[0] - self.plan.started, 0.0)
        if not self.interactive:
            logging.info("%s", "  ".join(text for _, text in fields[1:]))
            return
        self._line = fit_fields(fields, shutil.get_terminal_size().columns - 1)
        self.redraw()

    def clear(self):
        """Erases the bar's line (the cursor goes to its start)."""
        self.stream.write("\r\x1b[K")
        self.stream.flush()

    def redraw(self):
        if self._line:
            self.stream.write(f"\r{self._line}\x1b[K")
            self.stream.flush()

    def finish(self):
        if self.interactive:
            root = logging.getLogger()
            for index, handler, wrapper in self._wrapped:
                if index < len(root.handlers) and root.handlers[index] is wrapper:
                    root.handlers[index] = handler
            self._wrapped = []
            self.stream.write("\n")
            self.stream.flush()


def fit_fields(fields, width):
    """Joins `fields` ([(priority, text)]) with two spaces, dropping the lowest priorities
    until the line fits in `width` characters."""
    kept = list(fields)
    while len(kept) > 1 and len("  ".join(text for _, text in kept)) > width:
        kept.remove(min(kept, key=lambda field: field[0]))
    return "  ".join(text for _, text in kept)[:max(width, 0)]


def _is_terminal(stream):
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())
