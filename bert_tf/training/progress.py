"""Console progress: a one-line bar on a terminal, plain log lines otherwise."""

import logging
import sys
import time


def _duration(seconds):
    seconds = int(max(seconds, 0))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{seconds:02d}s" if hours else f"{minutes}m{seconds:02d}s"


class Progress:
    """Reports training progress once per loop.

    On a terminal (`stream.isatty()`) it redraws one line with a bar, the
    loss, the throughput and the ETA; otherwise (logs, CI) it writes one log
    line per report.
    """

    def __init__(self, first_step, total_steps, stream=None, width=24):
        self.first_step = first_step
        self.total_steps = total_steps
        self.stream = stream or sys.stdout
        self.interactive = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.width = width
        self.start = time.monotonic()

    def update(self, step, metrics, examples_per_second):
        done = step - self.first_step
        elapsed = time.monotonic() - self.start
        eta = elapsed / done * (self.total_steps - step) if done else 0.0
        text = (f"step {step}/{self.total_steps}  loss {metrics.get('loss', float('nan')):.4f}"
                + "".join(f"  {name} {metrics[name]:.4f}"
                          for name in ("mlm_accuracy", "nsp_accuracy", "accuracy")
                          if name in metrics)
                + f"  {examples_per_second:.1f} ex/s  ETA {_duration(eta)}")
        if self.interactive:
            filled = int(self.width * step / max(self.total_steps, 1))
            bar = "#" * filled + "." * (self.width - filled)
            self.stream.write(f"\r[{bar}] {text}\x1b[K")
            self.stream.flush()
        else:
            logging.info("%s", text)

    def finish(self):
        if self.interactive:
            self.stream.write("\n")
            self.stream.flush()
