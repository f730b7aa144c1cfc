"""docs/export-and-serving.md against real exports: its signature tables against what
`saved_model_cli show --all` prints, and every REST request body on the page against
the signature it names, fed through the loaded signature as TF Serving's REST layer
converts it, and answered in the shape of the page's example response."""

import os
import subprocess
import sys

import pytest
import tensorflow as tf

from bert_tf.checkpoints.task_record import TaskRecord
from bert_tf.export import export_model, kinds
from tests.export import rest_json, serving_docs
from tests.export.export_helpers import TASKS, build_model, tiny_config

DOCS_TEXT = serving_docs.docs_text()
SIGNATURE_TABLE, KIND_TABLE = serving_docs.tables(
    serving_docs.section(DOCS_TEXT, "Signatures"))[:2]
EXAMPLES = serving_docs.rest_examples(DOCS_TEXT)
SAME_AS_SERVING_DEFAULT = "as `serving_default`"
FAST_KINDS = ("classifier",)
# What each example's label on the page names; every example must have one.
EXAMPLE_KINDS = {"rte": "classifier", "stsb": "regressor", "SQuAD": "span_labeler",
                 "NER": "token_classifier", "SWAG": "multiple_choice", "any model": "classifier"}


def _kind_rows():
    """{kind: (inputs cell, outputs cell, serve_token_ids outputs cell)} of the kind table."""
    rows = {}
    for name, *cells in KIND_TABLE[1:]:
        for kind in serving_docs.kind_names(name):
            rows[kind] = cells
    return rows


def _letter_sizes(record):
    """What a docs shape letter is in the printed shape (-1: any size)."""
    return {"B": -1, "S": -1, "C": record.num_choices, "D": tiny_config().hidden_size,
            "K": len(record.label_names) if record.label_names else None}


def _compare(where, shown, cell, record, dtype=None, override=None):
    """Problems of the printed tensors `shown` against the docs cell's names and shapes."""
    required, optional, overrides = serving_docs.cell_tensors(cell)
    problems = []
    missing = sorted(set(required) - set(shown))
    extra = sorted(set(shown) - set(required) - set(optional))
    if missing or extra:
        problems.append(f"{where}: docs name {sorted(required)} (+ {sorted(optional)}), "
                        f"the export has {sorted(shown)}")
    sizes = _letter_sizes(record)
    for name, letters in required.items():
        letters = overrides.get(override, letters)
        if name not in shown:
            continue
        if dtype is not None and shown[name]["dtype"] != dtype:
            problems.append(f"{where} {name}: {shown[name]['dtype']}, docs say {dtype}")
        if letters is not None and shown[name]["shape"] != [sizes[x] for x in letters]:
            problems.append(f"{where} {name}: shape {shown[name]['shape']}, docs say "
                            f"{letters}")
    return problems


def docs_signature_problems(shown, record):
    """Every difference between the docs' tables and `show --all`'s signatures."""
    shown = {name: tensors for name, tensors in shown.items()
             if name != "__saved_model_init_op"}
    table = {row[0].strip("`"): row[1:] for row in SIGNATURE_TABLE[1:]}
    problems = []
    if sorted(shown) != sorted(table):
        problems.append(f"signatures: docs {sorted(table)}, the export {sorted(shown)}")
    kind_name = record.kind.replace("_", " ")
    inputs, outputs, token_id_outputs = _kind_rows()[record.kind]
    if token_id_outputs == SAME_AS_SERVING_DEFAULT:
        token_id_outputs = outputs
    cells = {
        "serving_default": (inputs, outputs, "DT_STRING"),  # "raw text"
        "encode": (*table["encode"], "DT_STRING"),
        "serve_token_ids": (table["serve_token_ids"][0], token_id_outputs, "DT_INT32"),
    }
    for name, (inputs_cell, outputs_cell, input_dtype) in cells.items():
        if name not in shown:
            continue
        problems += _compare(f"{name} inputs", shown[name]["inputs"], inputs_cell, record,
                             input_dtype, override=kind_name)
        problems += _compare(f"{name} outputs", shown[name]["outputs"], outputs_cell, record)
    return problems


def test_the_kind_table_has_a_row_for_every_serving_kind():
    assert sorted(_kind_rows()) == sorted(kinds.SERVING_KINDS)


def _show_all(path):
    run = subprocess.run([sys.executable, "-m", "tensorflow.python.tools.saved_model_cli",
                          "show", "--all", "--dir", path], capture_output=True, text=True,
                         env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"), timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return serving_docs.saved_model_cli_signatures(run.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("kind", [
    pytest.param(kind, marks=() if kind in FAST_KINDS else (pytest.mark.long, pytest.mark.full))
    for kind in TASKS])
def test_saved_model_cli_lists_the_signatures_the_docs_promise(exports, kind):
    _, record, path = exports[kind]
    assert docs_signature_problems(_show_all(path), record) == []


def test_the_docs_check_finds_a_wrong_table():
    """Positive control on printed signatures made to differ from the docs in three ways."""
    record = TASKS["multiple_choice"]
    shown = {
        "serving_default": {
            "inputs": {"context": {"dtype": "DT_STRING", "shape": [-1]},
                       "choices": {"dtype": "DT_STRING", "shape": [-1]}},  # not [B, C]
            "outputs": {"logits": {"dtype": "DT_FLOAT", "shape": [-1, 3]},
                        "probabilities": {"dtype": "DT_FLOAT", "shape": [-1, 3]}}},
        "encode": {"inputs": {"text": {"dtype": "DT_STRING", "shape": [-1]}},
                   "outputs": {"pooled_output": {"dtype": "DT_FLOAT", "shape": [-1, 32]}}},
    }
    assert docs_signature_problems(shown, record) == [
        "signatures: docs ['encode', 'serve_token_ids', 'serving_default'], "
        "the export ['encode', 'serving_default']",
        "serving_default inputs choices: shape [-1], docs say ['B', 'C']",
        "serving_default outputs: docs name ['choice_id', 'logits', 'probabilities'] (+ []), "
        "the export has ['logits', 'probabilities']",
        "encode outputs: docs name ['padding_mask', 'pooled_output', 'sequence_output'] "
        "(+ []), the export has ['pooled_output']",
    ]


# --- the REST examples ------------------------------------------------------------


def _example_record(label):
    """The task record of the model an example addresses, from the tasks' own code."""
    from bert_tf.data.glue import task_spec
    from bert_tf.tasks import ner, swag

    if label in ("rte", "stsb"):
        spec = task_spec(label)
        kind = "regressor" if spec.is_regression else "classifier"
        return TaskRecord(kind=kind, name=label, max_seq_length=32,
                          text_inputs=2 if spec.is_pair else 1,
                          label_names=None if spec.is_regression else spec.label_names)
    if label == "NER":
        return TaskRecord(kind="token_classifier", name="ner", max_seq_length=16,
                          label_names=tuple(ner.LABELS))
    if label == "SWAG":
        return TaskRecord(kind="multiple_choice", name="swag", max_seq_length=24,
                          num_choices=swag.NUM_CHOICES)
    return TASKS[EXAMPLE_KINDS[label]]


def _same_inputs(record, other):
    specs = [kinds.serving_kind(r.kind).text_inputs(r) for r in (record, other)]
    return [(s.name, s.shape.as_list(), s.dtype) for s in specs[0]] == [
        (s.name, s.shape.as_list(), s.dtype) for s in specs[1]]


@pytest.fixture(scope="module")
def example_exports(exports, tokenizer, tmp_path_factory):
    """label -> the loaded export it addresses, built on first use: the session's export of
    the kind when its serving inputs are those of the example's task, else a tiny export of
    that task."""
    loaded, base = {}, tmp_path_factory.mktemp("docs_examples")

    def export_for(label):
        record = _example_record(label)
        if _same_inputs(record, TASKS[record.kind]):
            path = exports[record.kind][2]
        else:
            path = str(base / record.name / "1")
            if not os.path.isdir(path):
                export_model(build_model(record.kind, record), tokenizer,
                             str(base / record.name), record, version=1)
        if path not in loaded:
            loaded[path] = tf.saved_model.load(path)
        return loaded[path]

    return export_for


def _signature_specs(loaded):
    return {name: {"inputs": {spec.name: {"dtype": spec.dtype.name,
                                          "shape": [-1 if d is None else d
                                                    for d in spec.shape.as_list()]}
                              for spec in tf.nest.flatten(fn.structured_input_signature)}}
            for name, fn in loaded.signatures.items()}


def _skeleton(value):
    """The JSON structure of a value: types, keys and list lengths, not the numbers."""
    if isinstance(value, dict):
        return {key: _skeleton(item) for key, item in sorted(value.items())}
    if isinstance(value, list):
        return ["list", len(value), _skeleton(value[0]) if value else None]
    return type(value).__name__


def test_every_example_on_the_page_names_a_known_model():
    assert len(EXAMPLES) >= 6
    assert sorted({example["label"] for example in EXAMPLES}) == sorted(EXAMPLE_KINDS)


@pytest.mark.parametrize("index", [
    pytest.param(i, marks=() if EXAMPLE_KINDS.get(e["label"]) in FAST_KINDS
                 else pytest.mark.long,
                 id=f"{i}-{e['label']}") for i, e in enumerate(EXAMPLES)])
def test_a_docs_request_runs_as_tf_serving_would_feed_it(example_exports, index):
    example = EXAMPLES[index]
    loaded = example_exports(example["label"])
    name, tensors, row_format = rest_json.request_tensors(example["request"],
                                                         _signature_specs(loaded))
    outputs = loaded.signatures[name](**{k: tf.constant(v) for k, v in tensors.items()})
    body = rest_json.response_body({k: v.numpy() for k, v in outputs.items()}, row_format)
    if example["response"] is not None:
        assert _skeleton(body) == _skeleton(example["response"])
    else:
        assert set(body) == {"predictions" if row_format else "outputs"}


@pytest.mark.parametrize("body, message", [
    ({"instances": [{"text": "a"}]},
     r"every instance must name the inputs \['text', 'text_pair'\]"),
    ({"inputs": {"text": ["a"], "text_pair": [1]}}, r"text_pair: 1 is not a JSON value of a "
                                                    r"string tensor"),
    ({"inputs": {"text": [["a"]], "text_pair": [["b"]]}},
     r"text: shape \[1, 1\], the signature takes \[-1\]"),
    ({"signature_name": "classify", "inputs": {"text": ["a"]}}, r"no signature 'classify'"),
    ({"instances": [{"text": "a", "text_pair": "b"}], "inputs": {}}, r"'instances' or 'inputs'"),
])
def test_a_request_tf_serving_would_refuse_is_refused(body, message):
    signatures = {"serving_default": {"inputs": {"text": {"dtype": "string", "shape": [-1]},
                                                 "text_pair": {"dtype": "string",
                                                               "shape": [-1]}}}}
    with pytest.raises(rest_json.RestRequestError, match=message):
        rest_json.request_tensors(body, signatures)
