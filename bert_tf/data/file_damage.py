"""In-graph checks that stop an input pipeline on a damaged file, naming the file.

tf.data runs its readers in graph, where an error cannot carry a Python
exception with fields. A failed `tf.debugging.Assert` carries its data in its
message instead, so every damage check of the readers (the corpus reader's
text check, the TFRecord reader's record count) fails with

    assertion failed: [Damaged input file] [<kind>] [<path>] [<reason> ...]

and `damage_in_message` reads kind, path and reason back from the error that
reaches the caller (the trainer turns it into its one error line).
"""

from __future__ import annotations

import dataclasses
import re

import tensorflow as tf

# What each check's files are: decides how `bert_tf.training.input_faults` re-reads one.
TEXT = "text"
TFRECORD = "tfrecord"
_MARK = "Damaged input file"
_ASSERTION = re.compile(r"assertion failed: ((?:\[[^\]]*\] ?)+)")


@dataclasses.dataclass(frozen=True)
class Damage:
    """A damaged file named by a failed check: its `kind`, `path` and what is wrong."""

    kind: str
    path: str
    reason: str


def assert_intact(intact, kind: str, path, *reason) -> tf.Operation:
    """An op that fails, naming `path`, when `intact` is False (see the module doc).

    Args:
      intact: a boolean scalar tensor.
      kind: `TEXT` or `TFRECORD`.
      path: the file's path (a string scalar tensor).
      *reason: what is wrong, as strings and scalar tensors, joined by spaces.
    """
    return tf.debugging.Assert(intact, [_MARK, kind, path, *reason], summarize=1)


def damage_in_message(message: str) -> Damage | None:
    """The `Damage` a failed `assert_intact` reports in `message`, or None.

    Args:
      message: an error's message (a `tf.errors.InvalidArgumentError`'s).
    """
    found = _ASSERTION.search(message)
    if not found:
        return None
    fields = re.findall(r"\[([^\]]*)\]", found.group(1))
    if len(fields) < 4 or fields[0] != _MARK:
        return None
    return Damage(fields[1], fields[2], " ".join(fields[3:]))
