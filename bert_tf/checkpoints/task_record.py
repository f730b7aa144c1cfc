"""The task record: what a trained model does, from its run to its exports.

A task writes it (`Task.task_record()`); the trainer stores it under "task" in
the run's `bert_tf_model.json`; `python -m bert_tf.convert` writes an encoder
or pretrainer record; the exporter reads it to build the serving signatures and
copies it into the export's `assets.extra/bert_tf_export.json`. It is validated
once, where it is made (`TaskRecord(...)` or `TaskRecord.from_dict`).

Record version 1 (the `version` key; records written before it existed have
none and are read as version 1, with their GLUE task name under "glue_task"
and, for STS-B, an empty "label_names"):

    kind            what the model does, one of `TASK_KINDS`
    name            the task that trained it ("glue", "squad", "ner", ...)
    max_seq_length  the sequence length it was trained and is served with
    dataset         optional: the data set, e.g. the GLUE task "MRPC"
    and by kind (`KIND_FIELDS`): label_names, text_inputs, num_choices,
    version_2_with_negative, max_answer_length, max_query_length.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

RECORD_VERSION = 1

TASK_KINDS = ("classifier", "regressor", "span_labeler", "token_classifier",
              "multiple_choice", "pretrainer", "encoder")

# The fields each kind requires; every other kind-specific field must be unset.
KIND_FIELDS = {
    "classifier": ("label_names", "text_inputs"),
    "regressor": ("text_inputs",),
    "span_labeler": ("version_2_with_negative", "max_answer_length", "max_query_length"),
    "token_classifier": ("label_names",),
    "multiple_choice": ("num_choices",),
    "pretrainer": (),
    "encoder": (),
}
_KIND_SPECIFIC = ("label_names", "text_inputs", "num_choices", "version_2_with_negative",
                  "max_answer_length", "max_query_length")

# google-research/bert run_squad.py defaults, for span labelers recorded without them.
SQUAD_DEFAULTS = {"version_2_with_negative": False, "max_answer_length": 30,
                  "max_query_length": 64}

# Model classes and the kind each implies (BertClassifier: by its number of classes).
_MODEL_KINDS = {"BertEncoder": "encoder", "BertPretrainer": "pretrainer",
                "BertSpanLabeler": "span_labeler", "BertTokenClassifier": "token_classifier",
                "BertMultipleChoice": "multiple_choice", "BertFeatureTagger": "token_classifier"}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclasses.dataclass(frozen=True)
class TaskRecord:
    """What a model does and how it is fed; immutable and checked on creation.

    Args:
      kind: one of `TASK_KINDS`.
      name: the task's name, e.g. "glue", "squad", "pretraining".
      max_seq_length: the sequence length (>= 2) for serving.
      dataset: optional data-set name, e.g. the GLUE task "MRPC".
      label_names: classifier and token classifier: the label of each class id.
      text_inputs: classifier and regressor: 1 (`text`) or 2 (`text`, `text_pair`).
      num_choices: multiple choice: the number of endings per example.
      version_2_with_negative: span labeler: SQuAD v2.0 (no-answer at [CLS]).
      max_answer_length: span labeler: the longest answer span in tokens.
      max_query_length: span labeler: questions are cut to this many tokens.
      version: the record's format version (`RECORD_VERSION`).
      source: names the record's origin (a file and key) in error messages;
        not part of the record.

    Raises:
      ValueError: naming `source`, the field and what was expected.
    """

    kind: str
    name: str
    max_seq_length: int
    dataset: str | None = None
    label_names: tuple[str, ...] | None = None
    text_inputs: int | None = None
    num_choices: int | None = None
    version_2_with_negative: bool | None = None
    max_answer_length: int | None = None
    max_query_length: int | None = None
    version: int = RECORD_VERSION
    source: dataclasses.InitVar[str] = "task record"

    def __post_init__(self, source: str) -> None:
        if isinstance(self.label_names, list):
            object.__setattr__(self, "label_names", tuple(self.label_names))
        self._check(source)

    def _check(self, source: str) -> None:
        def fail(field, expected, value):
            raise ValueError(f"{source}: '{field}'{self._for_kind(field)} must be {expected}, "
                             f"got {value!r}")

        if self.version != RECORD_VERSION or not _is_int(self.version):
            raise ValueError(
                f"{source}: record version {self.version!r} is not supported by this bert_tf "
                f"(it reads version {RECORD_VERSION}); upgrade bert_tf to read it")
        if self.kind not in TASK_KINDS:
            fail("kind", f"one of {TASK_KINDS}", self.kind)
        if not isinstance(self.name, str) or not self.name:
            fail("name", "a non-empty string", self.name)
        if not _is_int(self.max_seq_length) or self.max_seq_length < 2:
            fail("max_seq_length", "an integer >= 2", self.max_seq_length)
        if self.dataset is not None and not isinstance(self.dataset, str):
            fail("dataset", "a string or absent", self.dataset)
        required = KIND_FIELDS[self.kind]
        for field in _KIND_SPECIFIC:
            value = getattr(self, field)
            if field not in required:
                if value is not None:
                    raise ValueError(f"{source}: '{field}' does not apply to kind "
                                     f"{self.kind!r} (it takes {list(required) or 'none'})")
                continue
            if field == "label_names":
                if not (isinstance(value, tuple) and value
                        and all(isinstance(label, str) for label in value)):
                    fail(field, "a non-empty list of strings", value)
            elif field == "version_2_with_negative":
                if not isinstance(value, bool):
                    fail(field, "true or false", value)
            elif field == "text_inputs":
                if not (_is_int(value) and value in (1, 2)):
                    fail(field, "1 or 2", value)
            elif not (_is_int(value) and value >= 1):
                fail(field, "an integer >= 1", value)
        if self.kind == "span_labeler" and self.max_seq_length < self.max_query_length + 4:
            raise ValueError(
                f"{source}: max_seq_length {self.max_seq_length} leaves no room for a "
                f"context after max_query_length {self.max_query_length}")

    def _for_kind(self, field: str) -> str:
        return f" (for kind {self.kind!r})" if field in _KIND_SPECIFIC else ""

    # -- reading and writing ------------------------------------------------

    @classmethod
    def from_dict(cls, values: Mapping[str, Any], source: str = "task record") -> TaskRecord:
        """The record stored as `values` (a JSON object); the one validation.

        Args:
          values: the stored record.
          source: names the file and key in errors, e.g. "run/bert_tf_model.json 'task'".

        Raises:
          ValueError: an unknown or missing key, or a value of the wrong type.
        """
        if not isinstance(values, Mapping):
            raise ValueError(f"{source}: expected an object, got {type(values).__name__}")
        values = dict(values)
        if "version" not in values:
            # Records written before the version key named the GLUE task
            # "glue_task", and STS-B's (a regressor) carried `label_names: []`.
            if "glue_task" in values:
                values["dataset"] = values.pop("glue_task")
            if values.get("kind") == "regressor" and values.get("label_names") == []:
                del values["label_names"]
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - fields)
        if unknown:
            raise ValueError(f"{source}: unknown key(s) {unknown}; a task record has "
                             f"{sorted(fields)}")
        for key in ("kind", "name", "max_seq_length"):
            if key not in values:
                raise ValueError(f"{source}: missing the key {key!r}")
        return cls(**values, source=source)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object stored in `bert_tf_model.json` and export metadata."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        if self.label_names is not None:
            values["label_names"] = list(self.label_names)
        return {key: value for key, value in values.items() if value is not None}

    def replace(self, **changes: Any) -> TaskRecord:
        """A checked copy with `changes` applied (e.g. another `max_seq_length`)."""
        return dataclasses.replace(self, **changes)

    # -- records for models without one -----------------------------------

    @classmethod
    def for_model(cls, metadata: Mapping[str, Any], max_seq_length: int | None = None,
                  source: str = "bert_tf_model.json") -> TaskRecord:
        """The record a model directory implies when it has none.

        The kind comes from `model_class`; labels are named "0", "1", ...;
        classifiers take one text; span labelers take BERT's SQuAD defaults.

        Args:
          metadata: the `bert_tf_model.json` object.
          max_seq_length: the serving length; required (nothing else records it).
          source: names the file in errors.

        Raises:
          ValueError: no `max_seq_length`, or an unknown model class.
        """
        if max_seq_length is None:
            raise ValueError(
                f"{source} has no 'task' record (written before task records existed): "
                "pass --max_seq_length")
        task_args = metadata.get("task_args") or {}
        kind = kind_of_model(metadata.get("model_class"), task_args)
        fields: dict[str, Any] = {}
        if kind == "classifier":
            fields = {"label_names": [str(i) for i in range(task_args["num_classes"])],
                      "text_inputs": 1}
        elif kind == "regressor":
            fields = {"text_inputs": 1}
        elif kind == "token_classifier":
            fields = {"label_names": [str(i) for i in range(task_args["num_labels"])]}
        elif kind == "span_labeler":
            fields = dict(SQUAD_DEFAULTS)
        elif kind == "multiple_choice":
            fields = {"num_choices": task_args["num_choices"]}
        return cls(kind=kind, name=kind, max_seq_length=max_seq_length, source=source,
                   **fields)

    def check_fits(self, metadata: Mapping[str, Any], source: str = "bert_tf_model.json") -> None:
        """Raises ValueError when this record contradicts the model `metadata` describes.

        Args:
          metadata: a `bert_tf_model.json` object (`native.model_metadata`).
          source: names the file in errors.
        """
        task_args = metadata.get("task_args") or {}
        model_kind = kind_of_model(metadata.get("model_class"), task_args)
        if self.kind != model_kind:
            raise ValueError(
                f"{source}: task kind {self.kind!r} does not fit model_class "
                f"{metadata.get('model_class')} (a {model_kind})")
        sizes = {"classifier": "num_classes", "token_classifier": "num_labels"}
        if self.kind in sizes:
            expected = task_args.get(sizes[self.kind])
            if len(self.label_names) != expected:
                raise ValueError(
                    f"{source}: 'label_names' has {len(self.label_names)} names but the "
                    f"model has {sizes[self.kind]}={expected}")
        if self.kind == "multiple_choice" and self.num_choices != task_args.get("num_choices"):
            raise ValueError(
                f"{source}: 'num_choices' is {self.num_choices} but the model was built "
                f"with num_choices={task_args.get('num_choices')}")
        positions = (metadata.get("encoder_config") or {}).get("max_position_embeddings")
        if positions is not None and self.max_seq_length > positions:
            raise ValueError(
                f"{source}: max_seq_length {self.max_seq_length} exceeds the model's "
                f"max_position_embeddings {positions}")


def kind_of_model(model_class: str | None, task_args: Mapping[str, Any]) -> str:
    """The task kind a model class implies (a BertClassifier with one class regresses).

    Raises:
      ValueError: an unknown model class.
    """
    if model_class == "BertClassifier":
        return "regressor" if task_args.get("num_classes") == 1 else "classifier"
    if model_class not in _MODEL_KINDS:
        raise ValueError(
            f"unknown model_class {model_class!r}; expected BertClassifier or one of "
            f"{sorted(_MODEL_KINDS)}")
    return _MODEL_KINDS[model_class]
