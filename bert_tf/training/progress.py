"""Console progress: a one-line bar on a terminal, plain log lines otherwise."""

import logging
import shutil
import sys
import time


def _duration(seconds):
    seconds = int(max(seconds, 0))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{seconds:02d}s" if hours else f"{minutes}m{seconds:02d}s"


# Metrics shown after the loss, when the task reports them.
_SHOWN_METRICS = ("mlm_accuracy", "nsp_accuracy", "accuracy")


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

    Args:
      first_step: the step the run starts (or resumes) at.
      total_steps: the step it ends at.
      stream: where the bar goes (default stdout).
      width: the bar's width in characters, when it fits.
    """

    def __init__(self, first_step, total_steps, stream=None, width=24):
        self.first_step = first_step
        self.total_steps = total_steps
        self.stream = stream or sys.stdout
        isatty = getattr(self.stream, "isatty", None)
        self.interactive = bool(isatty and isatty())
        self.width = width
        # (time, step) the ETA is measured from: the end of the first (traced) step.
        self._origin = (time.monotonic(), first_step)
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
        origin_time, origin_step = self._origin
        done = step - origin_step
        eta = ((time.monotonic() - origin_time) / done * (self.total_steps - step) if done
               else None)
        filled = int(self.width * step / max(self.total_steps, 1))
        fields = [(1, f"[{'#' * filled}{'.' * (self.width - filled)}]"),
                  (9, f"step {step}/{self.total_steps}"),
                  (5, f"loss {metrics.get('loss', float('nan')):.4f}")]
        fields += [(4 - i, f"{name} {metrics[name]:.4f}")
                   for i, name in enumerate(n for n in _SHOWN_METRICS if n in metrics)]
        if first_step_seconds is not None:
            fields.append((8, f"first step {first_step_seconds:.1f}s (tracing, input pipeline)"))
            return fields
        if examples_per_second is not None:
            fields.append((7, f"{examples_per_second:.1f} ex/s"))
        fields.append((8, f"ETA {_duration(eta)}" if eta is not None else "ETA ?"))
        return fields

    def update(self, step, metrics, examples_per_second=None, first_step_seconds=None):
        """Reports `step` (see `fields` for the arguments)."""
        fields = self.fields(step, metrics, examples_per_second, first_step_seconds)
        if first_step_seconds is not None:
            self._origin = (time.monotonic(), step)
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
