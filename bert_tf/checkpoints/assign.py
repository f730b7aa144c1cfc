"""Copies arrays into slots with complete, named error reporting."""

import numpy as np


class CheckpointMismatchError(ValueError):
    """A checkpoint lacks a weight our model needs, or has it in another shape."""


def assign_to_slots(slots, arrays, source, allow_missing=()):
    """Assigns `arrays[slot.name]` (already in our layout) to every slot.

    Checks everything before assigning anything, so a failed load leaves the
    model untouched. `allow_missing` names slots that may be absent (they keep
    their initial values). Returns the names that were loaded.

    Raises `CheckpointMismatchError` naming every missing variable and every
    shape mismatch (expected and found) in `source`.
    """
    problems = []
    for slot in slots:
        if slot.name not in arrays:
            if slot.name not in allow_missing:
                problems.append(
                    f"missing variable {slot.name!r} (expected shape {tuple(slot.variable.shape)})")
            continue
        found = tuple(np.shape(arrays[slot.name]))
        expected = tuple(slot.variable.shape)
        if found != expected:
            problems.append(
                f"variable {slot.name!r}: expected shape {expected}, found {found}")
    if problems:
        raise CheckpointMismatchError(
            f"{source} does not fit the model:\n  " + "\n  ".join(problems))
    loaded = []
    for slot in slots:
        if slot.name in arrays:
            slot.variable.assign(np.asarray(arrays[slot.name], dtype=slot.variable.dtype))
            loaded.append(slot.name)
    return loaded
