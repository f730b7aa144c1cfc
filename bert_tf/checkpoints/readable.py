"""The newest checkpoint of a directory that reads back, and setting damaged ones aside.

A checkpoint `ckpt-N` is an index file (`ckpt-N.index`) and data shards
(`ckpt-N.data-K-of-M`), listed newest last in the directory's `checkpoint`
state file. Storage can damage any of them: a flipped byte (the shard's
checksum no longer matches), a truncated index (not an sstable), a missing
shard. Readers try the listed checkpoints newest first and take the first
that reads back; the trainer also sets the damaged ones aside.

TensorFlow's checkpoint reader raises a plain `OpError` (code UNKNOWN) for
every kind of damage, so the reason is taken from its message.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
from collections.abc import Callable
from typing import Any

import tensorflow as tf
from google.protobuf import text_format
from tensorflow.python.training.checkpoint_state_pb2 import CheckpointState

from bert_tf import storage

DAMAGED_SUFFIX = ".damaged"


class CheckpointReadError(ValueError):
    """No checkpoint of a directory reads back, or one cannot be read for lack of permission."""


@dataclasses.dataclass
class Damage:
    """Why one checkpoint does not read back."""

    prefix: str
    file: str
    reason: str

    def __str__(self) -> str:
        return f"{self.file}: {self.reason}"


def listed_checkpoints(directory: str) -> list[str]:
    """The checkpoint prefixes the `checkpoint` state file of `directory` lists, newest first."""
    state = tf.train.get_checkpoint_state(directory)
    if state is None:
        return []
    prefixes = list(state.all_model_checkpoint_paths)
    if state.model_checkpoint_path and state.model_checkpoint_path not in prefixes:
        prefixes.append(state.model_checkpoint_path)
    # The state file's paths come back joined to `directory`.
    return list(reversed(prefixes))


def _first_line(message: str) -> str:
    return message.strip().splitlines()[0] if message.strip() else "unreadable"


def damage_of(prefix: str, error: Exception) -> Damage:
    """The file and the reason of `error`, raised while reading checkpoint `prefix`.

    Raises:
      CheckpointReadError: the file exists but may not be read (permissions):
        that is for the user to fix, not damage to step over.
    """
    index = prefix + ".index"
    if not storage.exists(index):
        return Damage(prefix, index, "the index file is missing")
    message = _first_line(getattr(error, "message", None) or str(error))
    # An eager op's error wraps the reader's: "{{function_node ...}} <message> [Op:RestoreV2]".
    message = re.sub(r"^\{\{[^}]*\}\}\s*|\s*\[Op:\w+\]$", "", message)
    if "permission denied" in message.lower():
        raise CheckpointReadError(f"cannot read checkpoint {prefix}: {message}; fix the "
                                  "permissions and run the same command again") from None
    shard = re.search(r"shard (\d+)", message)
    if "sstable" in message:
        file = index
    elif shard:
        shards = sorted(storage.glob(storage.escape(prefix) + ".data-*"))
        number = int(shard.group(1))
        file = shards[number] if number < len(shards) else prefix + ".data-*"
    else:
        file = next((path for path in re.findall(r"\S+", message)
                     if path.rstrip(";:,").startswith(prefix)), prefix).rstrip(";:,")
    # The message often starts with the file it names; say it once.
    reason = message
    if message.startswith(file):
        reason = message[len(file):]
    elif message.startswith("TensorBundle") and ": " in message:
        reason = message.split(": ", 1)[1]
    return Damage(prefix, file, reason.lstrip(";: ") or "unreadable")


def checkpoint_reader(prefix: str):
    """TensorFlow's reader of checkpoint `prefix` (as `tf.train.load_checkpoint(prefix)`).

    Opened by its prefix directly: `load_checkpoint` takes a path that its
    file system calls a directory for a directory of checkpoints, and TF's
    ram:// file system calls `ram://run/ckpt-4` one once `ckpt-4.index` exists.
    """
    if storage.isdir(prefix):
        return tf.train.load_checkpoint(prefix)
    return tf.compat.v1.train.NewCheckpointReader(prefix)


def read_every_tensor(prefix: str, batch: int = 64) -> None:
    """Reads (and so checksums) every tensor of checkpoint `prefix`; raises on damage.

    `RestoreV2` reads tensors of every dtype, the input pipeline's variant
    state included (the checkpoint reader cannot convert those to numpy);
    `batch` tensors at a time bounds the memory it takes.
    """
    dtypes = checkpoint_reader(prefix).get_variable_to_dtype_map()
    names = sorted(dtypes)
    for start in range(0, len(names), batch):
        chunk = names[start:start + batch]
        tf.raw_ops.RestoreV2(prefix=prefix, tensor_names=chunk,
                             shape_and_slices=[""] * len(chunk),
                             dtypes=[dtypes[name] for name in chunk])


def newest_readable(directory: str, read: Callable[[str], Any] = read_every_tensor,
                    candidates: list[str] | None = None):
    """Calls `read(prefix)` on the checkpoints of `directory`, newest first, until one succeeds.

    Args:
      directory: the directory whose `checkpoint` state file lists the checkpoints.
      read: reads one checkpoint completely; raises `tf.errors.OpError` on damage.
      candidates: the prefixes to try, newest first (default: `listed_checkpoints`).

    Returns:
      `(prefix, read's result, [Damage of each newer checkpoint])`, or
      `(None, None, [])` when `directory` lists no checkpoint.

    Raises:
      CheckpointReadError: none of them reads back (naming each and why).
    """
    if candidates is None:
        candidates = listed_checkpoints(directory)
    damaged = []
    for prefix in candidates:
        try:
            return prefix, read(prefix), damaged
        except tf.errors.OpError as error:
            damaged.append(damage_of(prefix, error))
            logging.debug("checkpoint %s does not read back", prefix, exc_info=True)
    if not damaged:
        return None, None, []
    raise CheckpointReadError(
        f"no checkpoint in {directory} reads back ({'; '.join(map(str, damaged))}); to start "
        f"over, train in a new --model_dir, or move the ckpt-* files and the checkpoint file "
        f"out of {directory}")


def set_aside(prefix: str) -> str:
    """Moves every file of checkpoint `prefix` into `<prefix>.damaged/`; returns that directory.

    The checkpoint is also dropped from the directory's `checkpoint` state
    file, so `tf.train.CheckpointManager` neither restores it nor counts it
    against `max_to_keep`; the files stay for inspection.
    """
    destination = prefix + DAMAGED_SUFFIX
    number = 1
    while storage.exists(destination):
        number += 1
        destination = f"{prefix}{DAMAGED_SUFFIX}-{number}"
    storage.makedirs(destination)
    for path in storage.glob(storage.escape(prefix) + ".*"):
        if not path.startswith(prefix + DAMAGED_SUFFIX):
            storage.rename(path, os.path.join(destination, os.path.basename(path)))
    _drop_from_state(os.path.dirname(prefix), prefix)
    return destination


def _drop_from_state(directory: str, prefix: str) -> None:
    state = tf.train.get_checkpoint_state(directory)
    if state is None:
        return
    kept = [i for i, path in enumerate(state.all_model_checkpoint_paths) if path != prefix]
    timestamps = list(state.all_model_checkpoint_timestamps)
    updated = CheckpointState(
        last_preserved_timestamp=state.last_preserved_timestamp)
    # Written relative, as CheckpointManager writes them, so the directory can move.
    updated.all_model_checkpoint_paths.extend(
        os.path.relpath(state.all_model_checkpoint_paths[i], directory) for i in kept)
    if len(timestamps) == len(state.all_model_checkpoint_paths):
        updated.all_model_checkpoint_timestamps.extend(timestamps[i] for i in kept)
    if kept:
        updated.model_checkpoint_path = updated.all_model_checkpoint_paths[-1]
    path = os.path.join(directory, "checkpoint")
    with storage.atomic_write(path, encoding="utf-8") as f:
        f.write(text_format.MessageToString(updated))
