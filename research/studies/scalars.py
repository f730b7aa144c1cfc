"""A run's scalar curves: from its TensorBoard event files, or its record's `scalars.json`.

A run trained here has event files under `train/` and `eval/`; a run restored
from a study's records has instead one `scalars.json`, which keeps every
numeric scalar of both folders in a few kilobytes. `read` gives the same
curves from either, so the report does not care where a run came from.

`scalars.json` is `{"train": {metric: [[step, value], ...]}, "eval": {...}}`,
one line per metric. TensorBoard stores scalars as float32, and each value is
written as the shortest decimal that reads back as the same float32 (at most
9 significant digits), so curves read from a record equal those read from the
events bit for bit, and so do the reports built from them.
"""

import glob
import json
import math
import os

import numpy as np

from bert_tf.training.summaries import read_scalars

SCALARS_FILE = "scalars.json"
CURVE_DIRS = ("train", "eval")

Curves = dict[str, dict[str, list[tuple[int, float]]]]


def event_files(run_dir: str) -> list[str]:
    """The TensorBoard event files of the run's `train/` and `eval/` folders.

    Args:
      run_dir: a run's folder.
    """
    return sorted(path for split in CURVE_DIRS
                  for path in glob.glob(os.path.join(run_dir, split, "events.out.tfevents.*")))


def read(run_dir: str) -> Curves:
    """The run's curves: `{"train": {metric: [(step, value), ...]}, "eval": {...}}`.

    Read from the event files when the run has any (a run trained here), else
    from its `scalars.json` (a run restored from records); empty without either.

    Args:
      run_dir: a run's folder or its record.
    """
    if event_files(run_dir):
        return {split: read_scalars(os.path.join(run_dir, split)) for split in CURVE_DIRS}
    path = os.path.join(run_dir, SCALARS_FILE)
    if not os.path.isfile(path):
        return {split: {} for split in CURVE_DIRS}
    with open(path, encoding="utf-8") as f:
        saved = json.load(f)
    # Through float32: the value the events held, not the nearest double to its decimal.
    return {split: {metric: [(int(step), float(np.float32(value))) for step, value in points]
                    for metric, points in saved.get(split, {}).items()}
            for split in CURVE_DIRS}


def _number(value):
    """The shortest JSON number that reads back as the same float32 as `value`."""
    if math.isnan(value):
        return "NaN"  # as Python's json module writes and reads it
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return str(np.float32(value))


def dumps(curves: Curves) -> str:
    """The text of a `scalars.json` holding `curves` (as `read` returns them).

    Args:
      curves: `{"train": {metric: [(step, value), ...]}, "eval": {...}}`.
    """
    splits = []
    for split in CURVE_DIRS:
        # In the order read: a report lists the curves (in results.json) in that order.
        series = [f"  {json.dumps(metric)}: ["
                  + ", ".join(f"[{int(step)}, {_number(value)}]" for step, value in points) + "]"
                  for metric, points in curves.get(split, {}).items()]
        body = "{\n" + ",\n".join(series) + "\n }" if series else "{}"
        splits.append(f' "{split}": {body}')
    return "{\n" + ",\n".join(splits) + "\n}\n"


def write_from_events(run_dir: str) -> str | None:
    """Writes `scalars.json` from the run's event files, unless it is newer than all of them.

    Reading event files takes a while (about 50 ms each), and a study saves its
    records after every unit, so an up-to-date file is not written again.

    Args:
      run_dir: a run's folder.

    Returns:
      The path of `run_dir/scalars.json`, or None when the run has no event files.
    """
    events = event_files(run_dir)
    if not events:
        return None
    path = os.path.join(run_dir, SCALARS_FILE)
    if os.path.isfile(path) and os.path.getmtime(path) >= max(map(os.path.getmtime, events)):
        return path
    temporary = f"{path}.tmp-{os.getpid()}"  # two processes of a study may save at once
    try:
        with open(temporary, "w", encoding="utf-8") as f:
            f.write(dumps(read(run_dir)))
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):  # nothing half-written is left to be recorded
            os.remove(temporary)
    return path
