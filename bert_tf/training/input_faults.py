"""Training and evaluation files that fail under a running trainer.

What a fault looks like when it reaches the trainer, and the line it becomes:

    missing, moved        NotFoundError "<path>; No such file or directory"
    no read permission    PermissionDeniedError "<path>; Permission denied"
    a directory instead   FailedPreconditionError "<path>; Is a directory"
    garbage bytes, cut    a failed damage check of the reader (`bert_tf.data.file_damage`):
                          text that is not UTF-8, a TFRecord file cut or with a bad checksum;
                          or, when a TFRecord pipeline is built (the first evaluation,
                          a restart), its framing check's `records.CorruptRecordError`

`stop_on_read_error` turns each into one `InputReadError` line naming the file
and what went wrong; the run stops and its checkpoints are kept.

Read errors in the input pipeline's buffers. tf.data reads ahead (prefetch,
parallel reads) and a checkpoint saves what its buffers hold, a read error
included: a checkpoint written after a file failed but before the error
reached the train step replays that error once restored, although the file
has been repaired. Such a checkpoint's model, optimizer and step are good
(they never depended on the buffers); only its input state is not. So when a
restored input state fails on a file that now reads cleanly (`reads_cleanly`
re-reads it in full), `check_replayed` marks that input state as replaying
(and those of the checkpoints written since, which inherited the buffers),
and the run restarts from the same newest checkpoint with its input position
re-derived: from the newest checkpoint whose input state is not marked,
advanced by the batches between the two, or from the start of the data when
none is left (`TrainingCheckpoint.restore_latest`). The pipeline is
deterministic, so the batches are those of an uninterrupted run, and the
fault costs at most the steps since the last checkpoint.
"""

from __future__ import annotations

import codecs
import contextlib
import dataclasses
import logging
import os
import re

import tensorflow as tf

from bert_tf import storage
from bert_tf.data import file_damage, records

# TensorFlow's file errors name the file first: "<path>; No such file or directory".
_FILE_IN_MESSAGE = re.compile(r"(\S+?)[;:] (No such file or directory|Permission denied|"
                              r"Is a directory|Not a directory)")
# Errors of reading data (as opposed to, say, running out of memory).
_READ_ERRORS = (tf.errors.NotFoundError, tf.errors.PermissionDeniedError,
                tf.errors.DataLossError)
_CHUNK_BYTES = 1 << 20
# The read errors of building an input pipeline that name a file (a missing one is the
# config's mistake, said in its own line).
BUILD_ERRORS = (PermissionError, records.CorruptRecordError, tf.errors.OpError)


@dataclasses.dataclass(frozen=True)
class ReadFault:
    """What went wrong reading an input file.

    `file` is the file the error names (None when it names none); `kind` is
    `file_damage.TEXT` or `TFRECORD` when a damage check failed, else None.
    """

    file: str | None
    reason: str
    kind: str | None = None

    def describe(self) -> str:
        """`<file>: <reason>`, or the reason alone."""
        return f"{self.file}: {self.reason}" if self.file else self.reason


class InputReadError(RuntimeError):
    """A training or evaluation file could not be read; the run stopped, its checkpoints kept.

    `fault` is the `ReadFault`; `file` the file it names, when it names one.
    """

    def __init__(self, message: str, fault: ReadFault):
        super().__init__(message)
        self.fault = fault
        self.file = fault.file


class ReplayedInputError(Exception):
    """The restored input state replays a read error of a file that reads now: resume again."""


def read_fault(error: BaseException) -> ReadFault | None:
    """The `ReadFault` of an input pipeline's error; None when it is no read error.

    Args:
      error: an `OSError`, a `records.CorruptRecordError` or a `tf.errors.OpError` raised
        while reading data or building a pipeline.
    """
    if isinstance(error, records.CorruptRecordError):
        # The eager framing check of a TFRecord reader (`records.check_record_files`).
        return ReadFault(error.path, str(error).removeprefix(f"{error.path}: "),
                         file_damage.TFRECORD)
    if isinstance(error, OSError):
        reason = error.strerror or str(error)
        return ReadFault(error.filename, reason) if error.filename else ReadFault(None, reason)
    if not isinstance(error, tf.errors.OpError):
        return None
    message = error.message
    found = _FILE_IN_MESSAGE.search(message)
    if found:
        return ReadFault(found.group(1), found.group(2))
    damage = file_damage.damage_in_message(message)
    if damage is not None:
        return ReadFault(damage.path, damage.reason, damage.kind)
    if isinstance(error, _READ_ERRORS):
        lines = [line for line in message.strip().splitlines() if line.strip()]
        return ReadFault(None, lines[0] if lines else type(error).__name__)
    return None


@contextlib.contextmanager
def stop_on_read_error(what: str, latest_checkpoint,
                       catch=(OSError, records.CorruptRecordError, tf.errors.OpError)):
    """Turns an input file's read error into one `InputReadError` line naming the file.

    Args:
      what: "training" or "evaluation" (the data being read).
      latest_checkpoint: a callable giving the run's newest checkpoint, or None.
      catch: the errors looked at (others pass through as they are).
    """
    try:
        yield
    except catch as error:
        fault = read_fault(error)
        if fault is None:
            raise
        logging.debug("reading the %s data failed", what, exc_info=True)
        latest = latest_checkpoint()
        kept = (f"the last checkpoint ({os.path.basename(latest)}) is kept" if latest
                else "no checkpoint was written yet")
        raise InputReadError(
            f"cannot read the {what} data: {fault.describe()}; the run stopped and {kept}: "
            "repair the file and run the same command to resume", fault) from None


def reads_cleanly(fault: ReadFault) -> bool:
    """True when `fault.file` reads now, in full, without the fault (False without a file).

    A damaged text file must decode as UTF-8 without a NUL byte, a damaged
    TFRecord file must end after its last record and read with every checksum
    right; any other file must open and give its first byte.

    Args:
      fault: the fault an input pipeline reported.
    """
    if not fault.file:
        return False
    try:
        if fault.kind == file_damage.TFRECORD:
            records.scan_record_file(fault.file)  # the framing: a cut file fails here
            # Every record's checksum (TensorFlow's reader takes some cut files for shorter ones).
            tf.data.TFRecordDataset(fault.file).reduce(0, lambda count, _: count + 1)
            return True
        with storage.open(fault.file, "rb") as f:
            if fault.kind != file_damage.TEXT:
                f.read(1)
                return storage.isfile(fault.file)
            decoder = codecs.getincrementaldecoder("utf-8")()
            while chunk := f.read(_CHUNK_BYTES):
                if b"\0" in chunk:
                    return False
                decoder.decode(chunk)
            decoder.decode(b"", final=True)
            return True
    except (OSError, UnicodeDecodeError, records.CorruptRecordError, tf.errors.OpError):
        return False


def check_replayed(error: InputReadError, checkpoint, *, chief: bool, multi_worker: bool):
    """Raises `ReplayedInputError` when `error` came from a restored input state, not the file.

    That input state (and those of the checkpoints written since it was
    restored) is marked on `checkpoint` so that the next restore re-derives
    the input position instead (see the module doc). Returns when the error is
    the file's own: it stops the run.

    Args:
      error: the run's `InputReadError`.
      checkpoint: the run's `TrainingCheckpoint`.
      chief: this process writes the run directory.
      multi_worker: the run has several workers (whose collectives the error
        has broken: such a run stops whatever caused it).
    """
    source = checkpoint.input_source
    if source is None or not chief or multi_worker or not reads_cleanly(error.fault):
        return
    replaying = checkpoint.mark_input_replaying()
    logging.warning("the input state of %s holds the read error of %s from before it was "
                    "repaired; resuming from the newest checkpoint with the input position "
                    "re-derived", ", ".join(os.path.basename(p) for p in replaying),
                    error.file)
    raise ReplayedInputError()
