"""Reads SWAG multiple-choice examples from the official CSV or from JSON lines.

SWAG (Zellers et al., 2018) gives a context sentence (`sent1`), the start of
the next sentence (`sent2`) and four candidate endings for it; `label` is the
index of the true ending. Two layouts are read, chosen by file extension:

- `.csv`: the official files, header
  `,video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,...,ending3,label`
  (the unnamed first column is a row index; `test.csv` has no `label`).
  Columns are found by header name, so their order does not matter.
- `.jsonl`: one JSON object per line with at least `sent1`, `sent2` and
  `ending0`..`ending3` (the Hugging Face layout); other keys are ignored.
"""

import csv
import dataclasses
import json
import os

from bert_tf import storage

_TEXT_FIELDS = ("sent1", "sent2", "ending0", "ending1", "ending2", "ending3")
_LABEL = "label"
_NUM_ENDINGS = 4


@dataclasses.dataclass(frozen=True)
class SwagExample:
    """One SWAG question.

    Attributes:
      example_id: for the official CSV, the value of its unnamed first column
        (the row index); otherwise the 0-based index of the example in its file.
      context: the context sentence (`sent1`).
      start_phrase: the beginning of the sentence to complete (`sent2`).
      endings: the four candidate endings of `start_phrase`.
      label: index (0..3) of the true ending, or None when the file has none
        (the official test set).
    """

    example_id: str
    context: str
    start_phrase: str
    endings: tuple[str, str, str, str]
    label: int | None


def read_swag(path):
    """Reads a SWAG `.csv` (official layout) or `.jsonl` file into `SwagExample`s.

    Raises:
      ValueError: naming `path:line` and the missing key or column, a field of
        the wrong kind or a label outside 0..3; naming `path` for an unknown
        extension or a file without examples.
    """
    extension = os.path.splitext(os.fspath(path))[1].lower()
    if extension == ".csv":
        examples = _read_csv(path)
    elif extension == ".jsonl":
        examples = _read_jsonl(path)
    else:
        raise ValueError(f"{path}: unknown SWAG file type {extension!r}; expected .csv or .jsonl")
    if not examples:
        raise ValueError(f"{path}: no SWAG examples found")
    return examples


def _example(example_id, fields, label):
    """A SwagExample from the six text fields (in `_TEXT_FIELDS` order) and a label."""
    context, start_phrase, *endings = fields
    return SwagExample(example_id, context, start_phrase, tuple(endings), label)


def _check_label(label, where):
    """The label as an int in 0..3, or None; `where` prefixes the error message."""
    if label is None:
        return None
    # bool is an int in Python; `true` in a JSON file is a mistake, not label 1.
    if not isinstance(label, int) or isinstance(label, bool) or not 0 <= label < _NUM_ENDINGS:
        raise ValueError(f"{where}: '{_LABEL}' is {label!r}; expected an integer "
                         f"from 0 to {_NUM_ENDINGS - 1}")
    return label


def _read_csv(path):
    """Examples of an official SWAG CSV file, columns located by header name."""
    examples = []
    with storage.open(path, encoding="utf-8-sig", newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None:
            raise ValueError(f"{path}: empty file; expected a SWAG CSV header")
        missing = [name for name in _TEXT_FIELDS if name not in header]
        if missing:
            raise ValueError(f"{path}:1: header lacks the column(s) {', '.join(missing)}; "
                             f"found {header}")
        columns = [header.index(name) for name in _TEXT_FIELDS]
        label_column = header.index(_LABEL) if _LABEL in header else None
        # The official files name their row-index column "" (pandas' to_csv).
        id_column = 0 if header[0] == "" else None
        for row in reader:
            where = f"{path}:{reader.line_num}"
            if not row:
                continue
            if len(row) != len(header):
                raise ValueError(f"{where}: expected {len(header)} columns as in the header, "
                                 f"found {len(row)}")
            label = None
            if label_column is not None:
                label = _check_label(_parse_int(row[label_column], where), where)
            example_id = row[id_column] if id_column is not None else str(len(examples))
            examples.append(_example(example_id, [row[c] for c in columns], label))
    return examples


def _parse_int(text, where):
    """An integer CSV cell, with a clear error otherwise."""
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{where}: '{_LABEL}' is {text!r}; expected an integer "
                         f"from 0 to {_NUM_ENDINGS - 1}") from None


def _read_jsonl(path):
    """Examples of a JSON-lines file; blank lines are skipped."""
    examples = []
    with storage.open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            where = f"{path}:{number}"
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{where}: not valid JSON ({error.msg})") from None
            if not isinstance(row, dict):
                raise ValueError(f"{where}: expected a JSON object, found {type(row).__name__}")
            fields = []
            for key in _TEXT_FIELDS:
                if key not in row:
                    raise ValueError(f"{where}: missing key '{key}'")
                if not isinstance(row[key], str):
                    raise ValueError(f"{where}: '{key}' is {row[key]!r}; expected a string")
                fields.append(row[key])
            # A missing or null label marks an unlabelled (test) example.
            label = _check_label(row.get(_LABEL), where)
            examples.append(_example(str(len(examples)), fields, label))
    return examples
