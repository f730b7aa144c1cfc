"""Stopping a training run cleanly on a signal (preemption, Ctrl-C).

`StopOnSignal` turns SIGTERM and the first Ctrl-C (SIGINT) into a request the
train loop honours at its next step boundary; the trainer then saves a
checkpoint and exits 0. A second Ctrl-C aborts at once, without saving.
"""

import logging
import os
import signal
import sys
import threading

# Exit code of a run aborted by a second Ctrl-C (the shell's 128 + SIGINT).
ABORT_EXIT_CODE = 128 + signal.SIGINT


class StopOnSignal:
    """SIGTERM or Ctrl-C stops the run at the next step boundary, inside the loop.

    Python runs signal handlers only between bytecodes, i.e. after the
    running `tf.function` returns, which can be `steps_per_loop` steps away.
    So the signal's wakeup byte (the signal number) is read by a thread,
    which sets `stop` (a variable the train loop checks before every step)
    while the loop runs, and which aborts the process on a second SIGINT.
    A signal the process was started ignoring (e.g. SIGINT under `nohup`
    or `&`) stays ignored.

    Args:
      stop: a boolean `tf.Variable` the train loop checks before each step.
      signals: the signals that request the stop.
    """

    def __init__(self, stop, signals=(signal.SIGTERM, signal.SIGINT)):
        self.stop = stop
        # The name of the signal received, or None.
        self.received = None
        self._interrupts = 0
        self._previous = {}
        for signum in signals:
            if signal.getsignal(signum) is not signal.SIG_IGN:
                self._previous[signum] = signal.signal(signum, self._handle)
        self._read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)
        self._write_fd = write_fd
        self._previous_wakeup_fd = signal.set_wakeup_fd(write_fd)
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self):
        while True:
            data = os.read(self._read_fd, 1)
            if not data or data == b"\0":  # closed, or `close` asking us to end
                return
            if data[0] == signal.SIGINT:
                self._interrupts += 1
                if self._interrupts > 1:
                    os.write(sys.stderr.fileno(), b"\nsecond Ctrl-C: aborted without saving; "
                             b"the run resumes from its last checkpoint\n")
                    os._exit(ABORT_EXIT_CODE)
            if data[0] in self._previous:
                self.stop.assign(True)

    def _handle(self, signum, frame):
        del frame
        if self.received is not None:
            return  # a repeated signal: the watcher thread handles a second Ctrl-C
        self.received = signal.Signals(signum).name
        self.stop.assign(True)
        again = " (Ctrl-C again aborts without saving)" if signum == signal.SIGINT else ""
        logging.warning("%s received: saving at the next step boundary, then stopping%s",
                        self.received, again)

    def close(self):
        """Restores the previous handlers and wakeup fd; ends the watcher thread."""
        signal.set_wakeup_fd(self._previous_wakeup_fd)
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        os.write(self._write_fd, b"\0")
        self._thread.join()
        os.close(self._write_fd)
        os.close(self._read_fd)
