"""Stopping a training run on a signal (preemption, Ctrl-C, `timeout`), in bounded time.

`StopOnSignal` turns SIGTERM and the first Ctrl-C (SIGINT) into a request the
train loop honours at its next step boundary; the trainer then saves a
checkpoint and exits 0. Under TensorFlow's own preemption handling
(multi-worker, TPU), that handling owns SIGTERM and saves at the end of the
loop after the running one instead. Either way the steps must go on: a signal
that arrives before the process's first step finishes, or while a step hangs,
ends the process within seconds without saving, saying so. A second signal
ends it at once.

A step hangs once it has run `HANG_FACTOR` times the slowest step so far, at
least `MIN_HANG_SECONDS` and at most `MAX_HANG_SECONDS` (or twice the slowest
step, when that is longer). Steps are counted as they finish, also inside a
multi-step loop (`progress` reads the global step), so a loop of many steps
that keeps stepping is never taken for hung, and a step hung before the
signal ends the run as soon as the signal comes.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable

# Exit code of a run aborted by a second Ctrl-C (the shell's 128 + SIGINT).
ABORT_EXIT_CODE = 128 + signal.SIGINT
# How long a loop may still run after a signal, before the first step of this
# process finished (it traces the step and fills the input pipeline, which takes
# no known time): nothing was trained here, so little is lost by leaving, but a
# first step about to end still gets its checkpoint.
FIRST_STEP_GRACE_SECONDS = 5.0
# A step that has run HANG_FACTOR times the slowest step so far hangs; the
# allowance is at least MIN_HANG_SECONDS (a short step stalled by a loaded host or
# a slow read is not hung) and at most MAX_HANG_SECONDS, or twice the slowest step.
HANG_FACTOR = 5.0
MIN_HANG_SECONDS = 10.0
MAX_HANG_SECONDS = 120.0
# How often the step counter is read while a loop runs, and the deadline checked.
POLL_SECONDS = 0.5


class StopOnSignal:
    """SIGTERM or Ctrl-C stops the run at the next step boundary, or ends it if none comes.

    Python runs signal handlers only between bytecodes, i.e. after the
    running `tf.function` returns, which can be `steps_per_loop` steps away,
    or never when a step hangs. So the signal's wakeup byte (the signal
    number) is read by a thread, which sets `stop` (a variable the train loop
    checks before every step) while the loop runs, and aborts the process on a
    second signal. A second thread reads `progress` while a loop runs, and a
    third ends the process, after a signal, once the running step hangs (see
    the module doc) or, before the first step of this process finished,
    `FIRST_STEP_GRACE_SECONDS` after the signal. A signal the process was
    started ignoring (e.g. SIGINT under `nohup` or `&`) stays ignored.

    The trainer calls `loop_started` and `loop_finished` around every train
    loop: only a loop is under the deadline (a save or an evaluation is not).
    The first loop holds the process's first step, which traces: its time is
    no step's.

    Args:
      stop: a boolean `tf.Variable` the train loop checks before each step; None
        when another handler owns the signals (TensorFlow's preemption
        handling, which saves when a later loop returns): then this one only
        bounds the wait and aborts on a second signal.
      signals: the signals that request the stop.
      latest_checkpoint: returns the newest checkpoint's path or None, for the
        message of a run ended without saving.
      progress: returns the global step, read from another thread while a loop
        runs; None where it cannot be read before the loop returns (a TPU):
        then a loop is given its steps at the slowest pace so far, plus the
        allowance of one step, before it counts as hung.
      first_step_grace_seconds, min_hang_seconds: see above; None takes the module's
        `FIRST_STEP_GRACE_SECONDS` and `MIN_HANG_SECONDS`.
    """

    def __init__(self, stop=None, signals=(signal.SIGTERM, signal.SIGINT), *,
                 latest_checkpoint: Callable[[], str | None] = lambda: None,
                 progress: Callable[[], int] | None = None,
                 first_step_grace_seconds: float | None = None,
                 min_hang_seconds: float | None = None):
        self.stop = stop
        # The name of the signal received, or None.
        self.received = None
        self._latest_checkpoint = latest_checkpoint
        self._progress = progress
        self._first_step_grace = (FIRST_STEP_GRACE_SECONDS if first_step_grace_seconds is None
                                  else first_step_grace_seconds)
        self._min_hang = MIN_HANG_SECONDS if min_hang_seconds is None else min_hang_seconds
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._signals_seen = 0
        self._pending = None  # the signal a step boundary has not answered yet
        self._pending_at = 0.0
        self._loop = _Loop()
        self._first_step_seconds = None  # None until the process's first step finished
        self._slowest_step = 0.0
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
        self._threads = [threading.Thread(target=target, daemon=True)
                         for target in (self._watch, self._check, self._observe)]
        for thread in self._threads:
            thread.start()

    # -- the trainer's side --------------------------------------------------

    def loop_started(self, num_steps: int):
        """A train loop of `num_steps` steps starts: a pending signal's deadline runs.

        Args:
          num_steps: the steps the loop runs unless stopped.
        """
        with self._lock:
            self._loop = _Loop(num_steps, time.monotonic())

    def loop_finished(self, steps: int, seconds: float):
        """The running loop returned (a step boundary) after `steps` steps in `seconds`.

        Args:
          steps: the steps the loop ran.
          seconds: its wall time.
        """
        with self._lock:
            self._loop = _Loop()
            if steps <= 0:
                return
            if self._first_step_seconds is None:
                self._first_step_seconds = seconds
            else:
                self._slowest_step = max(self._slowest_step, seconds / steps)

    def close(self):
        """Restores the previous handlers and wakeup fd; ends the watching threads."""
        with self._lock:
            self._closed.set()
            self._loop = _Loop()
        signal.set_wakeup_fd(self._previous_wakeup_fd)
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        os.write(self._write_fd, b"\0")
        for thread in self._threads:
            thread.join(timeout=2 * POLL_SECONDS)  # a read of a hung device may not return

    # -- the watching threads ------------------------------------------------

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
                if self._pending is None:
                    self._pending, self._pending_at = signum, time.monotonic()

    def _observe(self):
        """Notes when the global step last moved, while a loop runs."""
        while self._progress is not None and not self._closed.wait(POLL_SECONDS):
            with self._lock:
                loop = self._loop
            if not loop.steps:
                continue
            try:
                value = self._progress()  # blocks while the device is stuck: no step seen
            except Exception:  # noqa: BLE001 (a watchdog must not end the run itself)
                logging.debug("reading the step counter failed", exc_info=True)
                with self._lock:
                    self._progress = None
                return
            with self._lock:
                loop.stepped(value, time.monotonic())

    def _check(self):
        while not self._closed.wait(POLL_SECONDS):
            with self._lock:
                message = None if self._closed.is_set() else self._overdue(time.monotonic())
                if message:
                    self._leave(message, self._pending)

    def _hang_seconds(self):
        """How long a step runs before it counts as hung (see the module doc)."""
        slowest = self._slowest_step
        return max(self._min_hang,
                   min(HANG_FACTOR * slowest, max(MAX_HANG_SECONDS, 2 * slowest)))

    def _overdue(self, now):
        """The error line when a signal waits for a step that does not come, else None."""
        loop = self._loop
        if self._pending is None or not loop.steps:
            return None
        if self._first_step_seconds is None:
            waited = now - max(self._pending_at, loop.started)
            if waited < self._first_step_grace:
                return None
            why = (f"the first training step of this process had not finished "
                   f"{self._first_step_grace:.0f} s after it (no step was trained here)")
            return self._error_line(why)
        hang = self._hang_seconds()
        if self._progress is not None:
            since = now - loop.last_step
        elif self.stop is not None:  # the loop ends after the step running at the signal
            since = now - max(self._pending_at, loop.started)
        else:  # no step is seen before the loop ends: its steps at the slowest pace
            pace = self._slowest_step or self._first_step_seconds
            since = now - loop.started - loop.steps * pace
        if since < hang:
            return None
        why = (f"no training step finished in the last {hang:.0f} s: the running step "
               f"hangs (steps so far took at most {self._slowest_step:.1f} s)")
        return self._error_line(why)

    def _error_line(self, why):
        return (f"error: {_signal_name(self._pending)} received, but {why}: stopped without "
                f"saving a checkpoint; the same command resumes from {self._resume_point()}")

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


class _Loop:
    """The running train loop: its steps (0 outside a loop), start, and last step seen."""

    def __init__(self, steps=0, started=0.0):
        self.steps = steps
        self.started = started
        self.last_step = started  # when the global step last moved (the loop's start at first)
        self._value = None

    def stepped(self, value, now):
        """Notes a read `value` of the global step at `now`."""
        if self._value is not None and value != self._value:
            self.last_step = now
        self._value = value


def _signal_name(signum):
    return signal.Signals(signum).name


def _label(signum):
    return "Ctrl-C" if signum == signal.SIGINT else _signal_name(signum)
