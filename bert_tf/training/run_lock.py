"""One live trainer per `model_dir`: an advisory lock on `model_dir/.lock`.

The lock is a `flock` on an open file, so the kernel releases it when the
process ends however it ends (exit, crash, SIGKILL): a dead run never leaves
the directory locked. The file itself stays behind, naming the last holder.
Only the chief of a multi-worker run writes the directory, so only it locks.
"""

import fcntl
import os
import socket

LOCK_FILE = ".lock"


class RunLockedError(RuntimeError):
    """Another live trainer holds the `model_dir`."""


class RunLock:
    """Holds `model_dir`'s lock from creation until `release` (or process exit).

    Args:
      model_dir: the run directory (created if missing).

    Raises:
      RunLockedError: another live process holds the lock (the message names
        the directory and, when recorded, that process).
    """

    def __init__(self, model_dir: str):
        os.makedirs(model_dir, exist_ok=True)
        self.path = os.path.join(model_dir, LOCK_FILE)
        self._file = open(self.path, "a+", encoding="utf-8")  # noqa: SIM115 (held open)
        try:
            fcntl.flock(self._file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._file.seek(0)
            holder = self._file.read().strip() or "another process"
            self._file.close()
            raise RunLockedError(
                f"{model_dir} is in use by a running trainer ({holder}); wait for it to end, "
                "or train in another --model_dir") from None
        self._file.seek(0)
        self._file.truncate()
        self._file.write(f"pid {os.getpid()} on {socket.gethostname()}")
        self._file.flush()

    def release(self) -> None:
        """Releases the lock (idempotent)."""
        if not self._file.closed:
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
