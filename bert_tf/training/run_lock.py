"""One live trainer per `model_dir`: an advisory lock on `model_dir/.lock`.

Local directory: the lock is a `flock` on an open file, so the kernel
releases it when the process ends however it ends (exit, crash, SIGKILL): a
dead run never leaves the directory locked. The file itself stays behind,
naming the last holder.

Object storage (`gs://...`): there is no flock, so `.lock` holds an owner
record (JSON: host, pid, start time and heartbeat time, in seconds since the
epoch). A background thread rewrites the heartbeat every `HEARTBEAT_SECONDS`
while the trainer holds the lock; a trainer on any host refuses a directory
whose record is fresher than `STALE_AFTER_SECONDS`, and takes over an older
one (its writer died without releasing). A record left by a process of this
host that no longer runs is taken over at once. `release` deletes the record.
The lock is advisory: it stops a second `bert_tf` trainer, nothing else, and
two trainers starting within the same instant may both see no record.
Hosts' clocks must agree to well within `STALE_AFTER_SECONDS`.

Only the chief of a multi-worker run writes the directory, so only it locks.
"""

import fcntl
import json
import logging
import os
import socket
import threading
import time

from bert_tf import storage

LOCK_FILE = ".lock"
# How often a trainer on object storage refreshes its owner record.
HEARTBEAT_SECONDS = 30.0
# A record whose heartbeat is older than this is a dead trainer's: the next trainer takes over.
STALE_AFTER_SECONDS = 300.0


class RunLockedError(RuntimeError):
    """Another live trainer holds the `model_dir`."""


def _busy_error(model_dir, holder):
    return RunLockedError(
        f"{model_dir} is in use by a running trainer ({holder}); wait for it to end, "
        "or train in another --model_dir")


class RunLock:
    """Holds `model_dir`'s lock from creation until `release` (or process exit).

    Args:
      model_dir: the run directory (created if missing).

    Raises:
      RunLockedError: another live process holds the lock (the message names
        the directory and, when recorded, that process).
    """

    def __init__(self, model_dir: str):
        storage.makedirs(model_dir, exist_ok=True)
        self.path = os.path.join(model_dir, LOCK_FILE)
        if storage.has_scheme(model_dir):
            self._lock = _OwnerRecordLock(model_dir, self.path)
        else:
            self._lock = _FlockLock(model_dir, self.path)

    def release(self) -> None:
        """Releases the lock (idempotent)."""
        self._lock.release()


class _FlockLock:
    """The kernel's lock on a local file."""

    def __init__(self, model_dir, path):
        self._file = storage.open(path, "a+", encoding="utf-8")  # noqa: SIM115 (held open)
        try:
            fcntl.flock(self._file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._file.seek(0)
            holder = self._file.read().strip() or "another process"
            self._file.close()
            raise _busy_error(model_dir, holder) from None
        self._file.seek(0)
        self._file.truncate()
        self._file.write(f"pid {os.getpid()} on {socket.gethostname()}")
        self._file.flush()

    def release(self):
        if not self._file.closed:
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()


def read_owner(path: str) -> dict | None:
    """The owner record at `path`, or None when there is none or it is unreadable."""
    try:
        record = json.loads(storage.read_text(path))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def is_stale(record: dict, now: float) -> bool:
    """True when `record`'s owner is gone: no heartbeat for `STALE_AFTER_SECONDS`, or a
    process of this host that no longer runs."""
    heartbeat = record.get("heartbeat")
    if not isinstance(heartbeat, (int, float)) or now - heartbeat > STALE_AFTER_SECONDS:
        return True
    pid = record.get("pid")
    if record.get("host") == socket.gethostname() and isinstance(pid, int):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False  # alive, another user's
    return False


def _holder(record):
    age = time.time() - record.get("heartbeat", 0)
    return f"pid {record.get('pid')} on {record.get('host')}, heartbeat {age:.0f} s ago"


class _OwnerRecordLock:
    """An owner record with a heartbeat, for file systems without flock."""

    def __init__(self, model_dir, path):
        self._path = path
        existing = read_owner(path)
        if existing is not None and not is_stale(existing, time.time()):
            raise _busy_error(model_dir, _holder(existing) + (
                f"; a record is stale after {STALE_AFTER_SECONDS:.0f} s without heartbeat"))
        if existing is not None:
            logging.warning("taking over %s from a trainer that stopped without releasing it "
                            "(%s)", path, _holder(existing))
        now = time.time()
        self._record = {"host": socket.gethostname(), "pid": os.getpid(), "started": now,
                        "heartbeat": now}
        self._write()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="run-lock-heartbeat",
                                        daemon=True)
        self._thread.start()

    def _write(self):
        with storage.open(self._path, "w", encoding="utf-8") as f:
            json.dump(self._record, f)

    def _is_ours(self):
        record = read_owner(self._path)
        return record is not None and all(
            record.get(key) == self._record[key] for key in ("host", "pid", "started"))

    def _beat(self):
        while not self._stop.wait(HEARTBEAT_SECONDS):
            if not self._is_ours():
                logging.warning("%s was taken over by another trainer; no longer refreshing it",
                                self._path)
                return
            self._record["heartbeat"] = time.time()
            try:
                self._write()
            except Exception as error:  # a storage error: try again next beat
                logging.warning("could not refresh %s: %s", self._path, error)

    def release(self):
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join()
        if self._is_ours():
            storage.remove(self._path)
