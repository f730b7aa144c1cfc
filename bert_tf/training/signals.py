"""Stopping a training run on a signal (preemption, Ctrl-C, `timeout`), in bounded time.

`StopOnSignal` turns SIGTERM and the first Ctrl-C (SIGINT) into a request the
train loop honours at its next step boundary; the trainer then saves a
checkpoint and exits 0. Under TensorFlow's own preemption handling
(multi-worker, TPU), that handling owns SIGTERM and saves at the loop's end
instead. Either way a step boundary must come in time: a signal that arrives
before the process's first step finishes, or while a step hangs, ends the
process within seconds without saving, saying so. A second signal ends it at
once.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Callable

# Exit code of a run aborted by a second Ctrl-C (the shell's 128 + SIGINT).
ABORT_EXIT_CODE = 128 + signal.SIGINT
# How long a loop may still run after a signal, before the first step of this
# process finished: nothing was trained here, so little is lost by leaving, but a
# first step about to end still gets its checkpoint.
FIRST_STEP_GRACE_SECONDS = 5.0
# After that: the longer of this and HANG_FACTOR times the slowest step (or loop,
# when the loop runs to its end before stopping) seen so far.
MIN_GRACE_SECONDS = 30.0
HANG_FACTOR = 5.0


class StopOnSignal:
    """SIGTERM or Ctrl-C stops the run at the next step boundary, or ends it if none comes.

    Python runs signal handlers only between bytecodes, i.e. after the
    running `tf.function` returns, which can be `steps_per_loop` steps away,
    or never when a step hangs. So the signal's wakeup byte (the signal
    number) is read by a thread, which sets `stop` (a variable the train loop
    checks before every step) while the loop runs, aborts the process on a
    second signal, and ends it when the running loop overstays its grace
    (`FIRST_STEP_GRACE_SECONDS` before the first step finished, else the
    longer of `MIN_GRACE_SECONDS` and `HANG_FACTOR` times the slowest step).
    A signal the process was started ignoring (e.g. SIGINT under `nohup` or
    `&`) stays ignored.

    The trainer calls `loop_started` and `loop_finished` around every train
    loop: only a loop is under the deadline (a save or an evaluation is not).

    Args:
      stop: a boolean `tf.Variable` the train loop checks before each step; None
        when another handler owns the signals (TensorFlow's preemption
        handling, which saves when the loop returns): then this one only
        bounds the wait and aborts on a second signal.
      signals: the signals that request the stop.
      latest_checkpoint: returns the newest checkpoint's path or None, for the
        message of a run ended without saving.
      first_step_grace_seconds, min_grace_seconds: see above; None takes the module's
        `FIRST_STEP_GRACE_SECONDS` and `MIN_GRACE_SECONDS`.
    """

    def __init__(self, stop=None, signals=(signal.SIGTERM, signal.SIGINT), *,
                 latest_checkpoint: Callable[[], str | None] = lambda: None,
                 first_step_grace_seconds: float | None = None,
                 min_grace_seconds: float | None = None):
        self.stop = stop
        # The name of the signal received, or None.
        self.received = None
        self._latest_checkpoint = latest_checkpoint
        self._first_step_grace = (FIRST_STEP_GRACE_SECONDS if first_step_grace_seconds is None
                                  else first_step_grace_seconds)
        self._min_grace = MIN_GRACE_SECONDS if min_grace_seconds is None else min_grace_seconds
        self._lock = threading.Lock()
        self._signals_seen = 0
        self._pending = None  # the signal a step boundary has not answered yet
        self._loop_steps = 0  # steps of the running loop; 0 outside a loop
        self._slowest_step = 0.0
        self._slowest_loop = 0.0
        self._deadline = None
        self._watched = {signum for signum in signals
                         if signal.getsignal(signum) is not signal.SIG_IGN}
        self._previous = {}
        if stop is not None:
            for signum in self._watched:
                self._previous[signum] = signal.signal(signum, self._handle)
        self._read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)
        self._write_fd = write_fd
        self._previous_wakeup_fd = signal.set_wakeup_fd(write_fd)
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    # -- the trainer's side --------------------------------------------------

    def loop_started(self, num_steps: int):
        """A train loop of `num_steps` steps starts: a pending signal's deadline runs.

        Args:
          num_steps: the steps the loop runs unless stopped.
        """
        with self._lock:
            self._loop_steps = num_steps
            if self._pending is not None:
                self._start_deadline()

    def loop_finished(self, steps: int, seconds: float):
        """The running loop returned (a step boundary) after `steps` steps in `seconds`.

        Args:
          steps: the steps the loop ran.
          seconds: its wall time.
        """
        with self._lock:
            self._loop_steps = 0
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None
            if steps > 0:
                self._slowest_step = max(self._slowest_step, seconds / steps)
                self._slowest_loop = max(self._slowest_loop, seconds)

    def close(self):
        """Restores the previous handlers and wakeup fd; ends the watcher thread."""
        with self._lock:
            if self._deadline is not None:
                self._deadline.cancel()
        signal.set_wakeup_fd(self._previous_wakeup_fd)
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        os.write(self._write_fd, b"\0")
        self._thread.join()

    # -- the watcher thread --------------------------------------------------

    def _watch(self):
        while True:
            data = os.read(self._read_fd, 1)
            if not data or data == b"\0":  # closed, or `close` asking us to end
                return
            signum = data[0]
            if signum not in self._watched:
                continue
            with self._lock:
                self._signals_seen += 1
                if self._signals_seen > 1:
                    self._leave(f"second {_label(signum)}: aborted without saving; the run "
                                f"resumes from {self._resume_point()}", signum)
                if self.stop is not None:
                    self.stop.assign(True)
                self._pending = signum
                if self._loop_steps:
                    self._start_deadline()

    def _grace(self):
        if self._slowest_step == 0.0:
            return self._first_step_grace
        # With `stop`, the loop ends at its next step; without, it runs to its end.
        slowest = self._slowest_step if self.stop is not None else self._slowest_loop
        return max(self._min_grace, HANG_FACTOR * slowest)

    def _start_deadline(self):
        if self._deadline is not None:
            return
        grace = self._grace()
        if self._slowest_step == 0.0:
            why = (f"the first training step of this process had not finished {grace:.0f} s "
                   "after it (no step was trained here)")
        else:
            why = (f"the running step had not finished {grace:.0f} s after it (steps so far "
                   f"took at most {self._slowest_step:.1f} s)")
        message = (f"error: {_signal_name(self._pending)} received, but {why}: stopped without "
                   f"saving a checkpoint; the same command resumes from {self._resume_point()}")
        self._deadline = threading.Timer(grace, self._leave, args=(message, self._pending))
        self._deadline.daemon = True
        self._deadline.start()

    def _resume_point(self):
        latest = self._latest_checkpoint()
        return latest if latest else "the start (no checkpoint yet)"

    @staticmethod
    def _leave(message, signum):
        os.write(sys.stderr.fileno(), ("\n" + message + "\n").encode("utf-8"))
        os._exit(128 + signum)

    # -- the main thread -----------------------------------------------------

    def _handle(self, signum, frame):
        del frame
        if self.received is not None:
            return  # a repeated signal: the watcher thread aborts on it
        self.received = signal.Signals(signum).name
        self.stop.assign(True)
        again = " (Ctrl-C again aborts without saving)" if signum == signal.SIGINT else ""
        logging.warning("%s received: saving at the next step boundary, then stopping%s",
                        self.received, again)


def _signal_name(signum):
    return signal.Signals(signum).name


def _label(signum):
    return "Ctrl-C" if signum == signal.SIGINT else _signal_name(signum)
