"""Readers for the official GLUE TSV files and writers of GLUE submission files.

Each of the nine GLUE tasks ships `train.tsv`, one or two dev files and one or
two test files in a folder named after the task (`SST-2/`, `MNLI/`, ...). The
layouts differ per task; columns are found by header name, so a file with the
columns in another order still reads, and a missing column is a clear error.
CoLA's train and dev files are the exception: they have no header, and their
four columns (source, label, original-label marker, sentence) are positional.

The files are read with tab as the only delimiter and no quoting: GLUE text
holds stray double quotes that a quote-aware parser would merge across tabs
and lines. Every row must have as many columns as the header. Note that the
first GLUE release of QQP had rows broken by embedded newlines; the later
`QQP-clean` release reads cleanly, the old one is rejected with the line.
"""

import csv
import dataclasses
import math
import operator
import os
import tempfile

from bert_tf import storage

GLUE_TASKS = ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli")

# STS-B similarity scores are annotated on a 0 (unrelated) to 5 (equivalent) scale.
STSB_MIN_SCORE = 0.0
STSB_MAX_SCORE = 5.0


@dataclasses.dataclass(frozen=True)
class GlueTaskSpec:
    """What a fine-tuning task needs to know about one GLUE task.

    Attributes:
      name: short task name, one of `GLUE_TASKS` ("sst2").
      directory: the task's folder under the GLUE data folder ("SST-2").
      label_names: label strings as they appear in the files; a label id is an
        index into this tuple. Empty for the regression task STS-B.
      is_regression: True when the label is a float score (STS-B).
      is_pair: True when an example holds two texts.
      metric_names: the keys `bert_tf.tasks.glue_metrics.compute` returns for
        this task, main metric first.
      eval_splits: the labelled evaluation splits ("dev", or MNLI's two).
      test_splits: the unlabelled test splits of the leaderboard.
    """

    name: str
    directory: str
    label_names: tuple
    is_regression: bool
    is_pair: bool
    metric_names: tuple
    eval_splits: tuple
    test_splits: tuple


@dataclasses.dataclass(frozen=True)
class GlueExample:
    """One row of a GLUE file.

    Attributes:
      guid: "<split>-<row>" (row counted from 0 after the header) for labelled
        splits; the file's index column for test rows (the row number when the
        file has none), which is what the submission file needs.
      text_a: the first (or only) text.
      text_b: the second text of a pair task, else None.
      label: the label name for classification, the float score for STS-B,
        None for test rows.
    """

    guid: str
    text_a: str
    text_b: str | None
    label: str | float | None


@dataclasses.dataclass(frozen=True)
class _Layout:
    """Where a task's files keep their fields: header names of the columns."""

    text_a: str
    text_b: str | None
    label: str
    # Test files number their rows in this column.
    index: str = "index"
    # Column names for labelled files without a header line (CoLA only).
    headerless_columns: tuple | None = None
    # The leaderboard's file name per test split.
    submission_files: tuple = ()


_BINARY = ("0", "1")
_ENTAILMENT = ("entailment", "not_entailment")
_DEV = ("dev",)
_TEST = ("test",)

_SPECS = {
    "cola": GlueTaskSpec("cola", "CoLA", _BINARY, False, False,
                         ("matthews_corrcoef", "accuracy"), _DEV, _TEST),
    "sst2": GlueTaskSpec("sst2", "SST-2", _BINARY, False, False, ("accuracy",), _DEV, _TEST),
    "mrpc": GlueTaskSpec("mrpc", "MRPC", _BINARY, False, True, ("f1", "accuracy"), _DEV, _TEST),
    "stsb": GlueTaskSpec("stsb", "STS-B", (), True, True, ("pearson", "spearman"), _DEV, _TEST),
    "qqp": GlueTaskSpec("qqp", "QQP", _BINARY, False, True, ("f1", "accuracy"), _DEV, _TEST),
    "mnli": GlueTaskSpec("mnli", "MNLI", ("entailment", "neutral", "contradiction"), False, True,
                         ("accuracy",), ("dev_matched", "dev_mismatched"),
                         ("test_matched", "test_mismatched")),
    "qnli": GlueTaskSpec("qnli", "QNLI", _ENTAILMENT, False, True, ("accuracy",), _DEV, _TEST),
    "rte": GlueTaskSpec("rte", "RTE", _ENTAILMENT, False, True, ("accuracy",), _DEV, _TEST),
    "wnli": GlueTaskSpec("wnli", "WNLI", _BINARY, False, True, ("accuracy",), _DEV, _TEST),
}

_LAYOUTS = {
    "cola": _Layout("sentence", None, "label",
                    headerless_columns=("source", "label", "original_label", "sentence"),
                    submission_files=(("test", "CoLA.tsv"),)),
    "sst2": _Layout("sentence", None, "label", submission_files=(("test", "SST-2.tsv"),)),
    # MRPC's label column is called "Quality" (from the original corpus).
    "mrpc": _Layout("#1 String", "#2 String", "Quality", submission_files=(("test", "MRPC.tsv"),)),
    "stsb": _Layout("sentence1", "sentence2", "score", submission_files=(("test", "STS-B.tsv"),)),
    "qqp": _Layout("question1", "question2", "is_duplicate", index="id",
                   submission_files=(("test", "QQP.tsv"),)),
    "mnli": _Layout("sentence1", "sentence2", "gold_label",
                    submission_files=(("test_matched", "MNLI-m.tsv"),
                                      ("test_mismatched", "MNLI-mm.tsv"))),
    "qnli": _Layout("question", "sentence", "label", submission_files=(("test", "QNLI.tsv"),)),
    "rte": _Layout("sentence1", "sentence2", "label", submission_files=(("test", "RTE.tsv"),)),
    "wnli": _Layout("sentence1", "sentence2", "label", submission_files=(("test", "WNLI.tsv"),)),
}


def task_spec(name):
    """The `GlueTaskSpec` of the task called `name` (one of `GLUE_TASKS`)."""
    if name not in _SPECS:
        raise ValueError(f"unknown GLUE task {name!r}; expected one of {GLUE_TASKS}")
    return _SPECS[name]


def _splits(spec):
    return ("train",) + spec.eval_splits + spec.test_splits


def split_path(task, split, data_dir):
    """Path of the TSV file of `split` ("train", "dev", "test", "dev_matched", ...)."""
    spec = task_spec(task)
    if split not in _splits(spec):
        raise ValueError(f"GLUE task {task!r} has no split {split!r}; "
                         f"expected one of {_splits(spec)}")
    return os.path.join(data_dir, spec.directory, f"{split}.tsv")


def _decoded_lines(path):
    """Yields the lines of `path` as text, with the exact line of a decoding error.

    Decoding line by line (rather than through `open(encoding=...)`, which
    decodes in blocks) is what lets an invalid byte be reported with its line.
    The first line is decoded as "utf-8-sig" so a byte-order mark (MRPC has
    one) does not leak into the first column name.
    """
    with storage.open(path, "rb") as handle:
        for line_no, raw in enumerate(handle, start=1):
            try:
                yield raw.decode("utf-8-sig" if line_no == 1 else "utf-8")
            except UnicodeDecodeError as error:
                raise ValueError(f"{path}:{line_no}: invalid UTF-8 (byte "
                                 f"{raw[error.start:error.start + 1]!r} at column "
                                 f"{error.start + 1}); expected a UTF-8 text file") from error


def _rows(path):
    """Yields (line number, fields) for every line of a GLUE TSV file."""
    reader = csv.reader(_decoded_lines(path), delimiter="\t", quoting=csv.QUOTE_NONE)
    try:
        for fields in reader:
            yield reader.line_num, fields
    except csv.Error as error:
        raise ValueError(f"{path}:{reader.line_num}: not a valid TSV line ({error})") from error


def _column(header, name, path, split):
    """Position of the column `name` in `header`; a clear error when absent."""
    if name not in header:
        raise ValueError(f"{path}:1: missing column {name!r} needed for the {split} split; "
                         f"the header has {header}")
    return header.index(name)


def _parse_label(spec, value, path, line_no, column):
    """The label of one row: a name from `spec.label_names`, or a float score."""
    if not spec.is_regression:
        if value not in spec.label_names:
            raise ValueError(f"{path}:{line_no}: column {column!r} holds {value!r}; "
                             f"expected one of {spec.label_names}")
        return value
    try:
        score = float(value)
    except ValueError:
        score = math.nan
    if not STSB_MIN_SCORE <= score <= STSB_MAX_SCORE:
        raise ValueError(f"{path}:{line_no}: column {column!r} holds {value!r}; "
                         f"expected a number from {STSB_MIN_SCORE} to {STSB_MAX_SCORE}")
    return score


def read_examples(task, split, data_dir):
    """Reads all examples of one split of a GLUE task.

    Args:
      task: one of `GLUE_TASKS`.
      split: "train", one of the task's `eval_splits` or `test_splits`.
      data_dir: the folder holding the task folders (`SST-2/`, `MNLI/`, ...).

    Returns:
      A list of `GlueExample` in file order; test rows have label None.

    Raises:
      ValueError naming the file and line for a missing column, a row with the
      wrong number of columns, an unknown label or invalid UTF-8.
    """
    spec = task_spec(task)
    layout = _LAYOUTS[task]
    path = split_path(task, split, data_dir)
    labelled = split not in spec.test_splits
    rows = _rows(path)
    if labelled and layout.headerless_columns is not None:
        header = list(layout.headerless_columns)
    else:
        _, header = next(rows, (1, []))
    wanted = [layout.text_a] + ([layout.text_b] if spec.is_pair else [])
    if labelled:
        wanted.append(layout.label)
    positions = [_column(header, name, path, split) for name in wanted]
    # Test files carry the leaderboard's index column; fall back to row numbers.
    index_position = None if labelled or layout.index not in header else header.index(layout.index)

    examples = []
    for row_no, (line_no, fields) in enumerate(rows):
        if len(fields) != len(header):
            raise ValueError(f"{path}:{line_no}: expected {len(header)} tab-separated columns "
                             f"({', '.join(header)}), got {len(fields)}")
        values = [fields[p] for p in positions]
        text_a = values[0]
        text_b = values[1] if spec.is_pair else None
        if labelled:
            guid = f"{split}-{row_no}"
            label = _parse_label(spec, values[-1], path, line_no, layout.label)
        else:
            guid = str(row_no) if index_position is None else fields[index_position]
            label = None
        examples.append(GlueExample(guid, text_a, text_b, label))
    return examples


def label_ids(task, examples):
    """Training targets of labelled examples.

    Returns:
      For classification, int indices into `task_spec(task).label_names`; for
      STS-B, the float scores.

    Raises:
      ValueError naming the guid of the first example whose label is missing or
      not one of the task's labels.
    """
    spec = task_spec(task)
    targets = []
    for example in examples:
        label = example.label
        if spec.is_regression:
            # bool is an int subclass but never a score.
            if isinstance(label, bool) or not isinstance(label, (int, float)):
                raise ValueError(f"example {example.guid}: label {label!r} is not a score; "
                                 f"{task} expects a float")
            targets.append(float(label))
        elif label in spec.label_names:
            targets.append(spec.label_names.index(label))
        else:
            raise ValueError(f"example {example.guid}: label {label!r} is not one of "
                             f"{spec.label_names} ({task})")
    return targets


def submission_file_name(task, split):
    """File name the GLUE leaderboard expects for the predictions of `split`."""
    spec = task_spec(task)
    names = dict(_LAYOUTS[task].submission_files)
    if split not in names:
        raise ValueError(f"no GLUE submission file for split {split!r} of {task!r}; "
                         f"expected one of {spec.test_splits}")
    return names[split]


def _prediction_text(spec, prediction, position):
    """One prediction as the leaderboard wants it: a label name or a 3-decimal score."""
    if spec.is_regression:
        try:
            score = float(prediction)
        except (TypeError, ValueError):
            score = math.nan
        if not math.isfinite(score):
            raise ValueError(f"prediction {position} is {prediction!r}; expected a finite score")
        return f"{min(max(score, STSB_MIN_SCORE), STSB_MAX_SCORE):.3f}"
    try:
        label_id = operator.index(prediction)
    except TypeError:
        label_id = None
    if label_id is None or not 0 <= label_id < len(spec.label_names):
        raise ValueError(f"prediction {position} is {prediction!r}; expected an integer label id "
                         f"from 0 to {len(spec.label_names) - 1}")
    return spec.label_names[label_id]


def write_submission(task, split, examples, predictions, output_dir):
    """Writes predictions for a test split in the GLUE leaderboard format.

    The file (`SST-2.tsv`, `MNLI-m.tsv`, ...) has the header
    "index<TAB>prediction" and one row per example: the example's guid (the
    test file's index column) and the label name, or for STS-B the score
    clipped to [0, 5] with 3 decimals. It is written to a temporary file and
    renamed, so a crash never leaves a half-written submission.

    Args:
      task: one of `GLUE_TASKS`.
      split: one of the task's `test_splits`.
      examples: the examples of that split, as `read_examples` returns them.
      predictions: one label id (int) per example, or one float for STS-B.
      output_dir: folder for the file; created when missing.

    Returns:
      The path of the file written.
    """
    spec = task_spec(task)
    file_name = submission_file_name(task, split)
    predictions = list(predictions)
    if len(predictions) != len(examples):
        raise ValueError(f"got {len(predictions)} predictions for {len(examples)} examples")
    lines = ["index\tprediction\n"]
    for position, (example, prediction) in enumerate(zip(examples, predictions)):
        lines.append(f"{example.guid}\t{_prediction_text(spec, prediction, position)}\n")

    storage.makedirs(output_dir, exist_ok=True)
    path = os.path.join(output_dir, file_name)
    if storage.has_scheme(output_dir):
        with storage.atomic_write(path, encoding="utf-8", newline="") as output:
            output.writelines(lines)
        return path
    handle, temp_path = tempfile.mkstemp(dir=output_dir, prefix=f".{file_name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as output:
            output.writelines(lines)
            output.flush()
            os.fsync(output.fileno())
        storage.rename(temp_path, path)
    except BaseException:
        storage.remove(temp_path)
        raise
    return path
