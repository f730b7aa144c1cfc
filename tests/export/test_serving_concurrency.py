"""Every export served from 8 threads at once, valid and malformed requests mixed.

One fresh process (tensorflow and tensorflow_text only, as a model server) loads
the session's tiny exports of every kind, float32 and int8, with
`tf.saved_model.load`; another (ONNX Runtime, no TensorFlow) loads the float32
and int8 ONNX models of a classifier. Each answers every request
single-threaded first, then from 8 threads over several rounds, the 8 threads
sharing one signature of one export at a time (`concurrent_serving.py`). Valid
answers must equal the single-threaded ones exactly: the same request runs the
same kernels on the same shapes, whatever runs beside it, so even the last bit
must not move. Malformed requests (the token-id checks, wrong dtypes, batch
sizes that differ between inputs) must be refused with their named errors every
time, and resident memory must stay flat after the warm-up rounds.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.export.export_helpers import TASKS

# Thousands of requests in a fresh process: the second test command (-m long).
pytestmark = pytest.mark.long

HERE = os.path.dirname(os.path.abspath(__file__))
THREADS = 8
WARMUP_ROUNDS = 2
ROUNDS = 6
RSS_GROWTH = 0.05  # at most 5 % above the resident memory after warm-up

LONG = " ".join(["word"] * 40)  # longer than every max_seq_length: truncated
TEXTS = {
    "classifier": {"text": ["A gorgeous film.", "Ünïcode ß"], "text_pair": ["dull", ""]},
    "regressor": {"text": ["A man plays a guitar.", "東京"]},
    "span_labeler": {"question": ["Where is it?", "When?"],
                     "context": ["It stands in Paris.", "Built in 1889."]},
    "token_classifier": {"text": ["John lives in\tZürich", "x"]},
    "multiple_choice": {"context": ["She opens the door.", "He sits."],
                        "choices": [["She walks in.", "It sings.", "ß"], ["a", "", "b c"]]},
    "encoder": {"text": ["The film is a delight.", "µ"]},
}
# The tiny models' limits (tests/export/export_helpers.py): vocab 30,522, 2 segment
# types, 64 positions.
VOCAB, POSITIONS = 30522, 64
TYPE_IDS_MESSAGE = r"input_type_ids: ids must be in \[0, 2\)"
WORD_IDS_MESSAGE = r"input_word_ids: ids must be in \[0, 30522\)"


def _strings(value, shape=None):
    shape = list(np.shape(value)) if shape is None else shape
    return {"value": value, "dtype": "str", "shape": shape}


def _ints(value, dtype="int32"):
    return {"value": value, "dtype": dtype, "shape": list(np.shape(value))}


def _token_ids(kind, word_ids, mask=None, type_ids=None, dtype="int32"):
    """serve_token_ids inputs from one row of ids ([1, S], or [1, C, S] for choices)."""
    mask = [1] * len(word_ids) if mask is None else mask
    type_ids = [0] * len(word_ids) if type_ids is None else type_ids

    def shaped(row):
        return [[row] * TASKS[kind].num_choices] if kind == "multiple_choice" else [row]

    return {"input_word_ids": _ints(shaped(word_ids), dtype),
            "input_mask": _ints(shaped(mask), dtype),
            "input_type_ids": _ints(shaped(type_ids), dtype)}


def requests_of(kind):
    """{id: (signature, inputs, expected error pattern or None)} for one export kind."""
    texts = TEXTS[kind]
    names = list(texts)
    first = names[0]
    long_row = {name: [[LONG] * 3] if name == "choices" else [LONG] for name in names}
    blank_row = {name: [[""] * 3] if name == "choices" else [""] for name in names}
    ids = [101, 7592, 2088, 102]  # [CLS] hello world [SEP]
    valid = {
        "text": ("serving_default", {n: _strings(v) for n, v in texts.items()}),
        "long_text": ("serving_default", {n: _strings(v) for n, v in long_row.items()}),
        "blank_text": ("serving_default", {n: _strings(v) for n, v in blank_row.items()}),
        "empty_batch": ("serving_default",
                        {n: _strings([], [0, 3] if n == "choices" else [0]) for n in names}),
        "encode": ("encode", {"text": _strings(texts[first])}),
        "token_ids": ("serve_token_ids", _token_ids(kind, ids)),
        # Another length and other ids: a signature shared between threads must keep
        # each request's own.
        "other_token_ids": ("serve_token_ids", _token_ids(
            kind, [101, 1037, 9202, 2143, 1012, 102, 0, 0], mask=[1] * 6 + [0] * 2,
            type_ids=[0, 0, 0, 1, 1, 1, 0, 0])),
    }
    malformed = {
        "id_out_of_vocab": (_token_ids(kind, [101, VOCAB, 102]), WORD_IDS_MESSAGE),
        "id_negative": (_token_ids(kind, [101, -1, 102]), WORD_IDS_MESSAGE),
        "type_id_2": (_token_ids(kind, ids, type_ids=[0, 2, 0, 0]), TYPE_IDS_MESSAGE),
        "mask_shape": (_token_ids(kind, ids, mask=[1, 1]),
                       "input_mask must have the shape of input_word_ids"),
        "mask_value": (_token_ids(kind, ids, mask=[1, 2, 1, 1]),
                       r"input_mask: values must be 0 or 1"),
        "too_long": (_token_ids(kind, [101] * (POSITIONS + 1)),
                     f"input_word_ids: sequence longer than max_position_embeddings={POSITIONS}"),
        "ids_int64": (_token_ids(kind, ids, dtype="int64"),
                      "expected to be a int32 tensor but is a int64 tensor"),
    }
    result = {key: (signature, inputs, None) for key, (signature, inputs) in valid.items()}
    result.update({key: ("serve_token_ids", inputs, message)
                   for key, (inputs, message) in malformed.items()})
    as_ints = {n: _ints([[1, 2, 3], [4, 5, 6]] if n == "choices" else [1, 2]) for n in names}
    result["text_as_int"] = ("serving_default", as_ints,
                             "expected to be a string tensor but is a int32 tensor")
    if len(names) == 2:
        # The second input one row short.
        second = names[1]
        shorter = {first: _strings(texts[first]), second: _strings(texts[second][:1])}
        result["batch_mismatch"] = (
            "serving_default", shorter,
            rf"serving inputs {first} and {second} must have the same batch size; "
            rf"{first} has\] \[2\] \[rows, {second} has\] \[1\]")
    return result


# The ONNX model's refusals: an ONNX model checks nothing, so they come from the client
# check every request goes through (`bert_tf.export.onnx_inputs.check_token_ids`).
ONNX_REFUSALS = {
    "id_out_of_vocab": r"input_word_ids: values must be in \[0, 30521\]",
    "id_negative": r"input_word_ids: values must be in \[0, 30521\]",
    "type_id_2": r"input_type_ids: values must be in \[0, 1\]",
    "mask_shape": r"input_mask: shape \(1, 2\) differs from input_word_ids",
    "mask_value": r"input_mask: values must be in \[0, 1\]",
    "too_long": r"input_word_ids: sequence of 65 is longer than",
    "ids_int64": r"input_word_ids: expected int32 integers, got int64",
}


def onnx_requests():
    """{id: (signature, inputs, expected error or None)} for the classifier's ONNX models."""
    requests = {key: value for key, value in requests_of("classifier").items()
                if value[0] == "serve_token_ids"}
    return {key: (signature, inputs, ONNX_REFUSALS.get(key) if message else None)
            for key, (signature, inputs, message) in requests.items()}


def _serve(runtime, exports, requests_by_export, directory):
    """Runs concurrent_serving.py; returns (what it printed, {request id: expected error})."""
    expected, requests = {}, []
    for name, export_requests in requests_by_export.items():
        for key, (signature, inputs, message) in export_requests.items():
            request_id = f"{name}/{key}"
            expected[request_id] = message
            requests.append({"id": request_id, "export": name, "signature": signature,
                             "inputs": inputs})
    request = {"runtime": runtime, "exports": exports, "threads": THREADS,
               "warmup_rounds": WARMUP_ROUNDS, "rounds": ROUNDS, "requests": requests}
    path = directory / "request.json"
    path.write_text(json.dumps(request), encoding="utf-8")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    run = subprocess.run([sys.executable, os.path.join(HERE, "concurrent_serving.py"),
                          str(path)], capture_output=True, text=True, env=env, timeout=1200)
    # No crash: the process ran every round and exited normally.
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1]), expected


@pytest.fixture(scope="module", params=["saved_model", "onnx"])
def served(request, exports, int8_exports, tokenizer, tmp_path_factory):
    """(printed, {request id: expected error or None}): SavedModels float32 and int8, or the
    classifier's ONNX models float32 and int8."""
    from bert_tf.export.onnx_export import export_onnx

    directory = tmp_path_factory.mktemp(f"concurrent_{request.param}")
    if request.param == "onnx":
        model, record, _ = exports["classifier"]
        paths = {f"onnx_{precision}": export_onnx(model, tokenizer, str(directory / precision),
                                                  record, quantization=quantization)
                 for precision, quantization in (("float32", None), ("int8", "int8"))}
        return _serve("onnxruntime", paths, {name: onnx_requests() for name in paths},
                      directory)
    paths = {kind: path for kind, (_, _, path) in exports.items()}
    # The same models exported int8: the test run's shared int8 exports.
    paths.update({f"{kind}@int8": int8_exports[kind][2] for kind in INT8_KINDS})
    return _serve("tensorflow", paths,
                  {name: requests_of(name.split("@")[0]) for name in paths}, directory)


# int8 exports served beside the float ones: a pair and a single text, spans, tokens.
INT8_KINDS = ("classifier", "regressor", "span_labeler", "token_classifier")


# Requests that must have been in flight at once at some moment. A SavedModel call
# waits on TensorFlow's executor threads, so all 8 threads get in (8 measured on 2
# cores). A tiny ONNX model answers in microseconds while ONNX Runtime's own threads
# keep both cores busy, so only about as many requests as cores overlap (2 and 3
# measured on 2 cores): two in flight is what proves a shared session served side by side.
LEAST_IN_FLIGHT = {"tensorflow": THREADS // 2, "onnxruntime": 2}


def test_requests_ran_concurrently_on_every_kind(served, exports):
    result, expected = served
    names = {key.split("/")[0] for key in expected}
    runtimes = {"tensorflow": {*exports, *(f"{kind}@int8" for kind in INT8_KINDS)},
                "onnxruntime": {"onnx_float32", "onnx_int8"}}
    runtime = "onnxruntime" if "onnx_float32" in names else "tensorflow"
    assert names == runtimes[runtime]
    assert result["max_in_flight"] >= LEAST_IN_FLIGHT[runtime]
    calls = THREADS * (WARMUP_ROUNDS + ROUNDS)
    assert all(sum(counts.values()) == calls for counts in result["concurrent"].values())


def test_valid_answers_equal_single_threaded_ones(served):
    result, expected = served
    valid = [key for key, message in expected.items() if message is None]
    exports = {key.split("/")[0] for key in expected}
    per_export = 2 if "onnx_int8" in exports else 7
    assert len(valid) == per_export * len(exports)
    for key in valid:
        single = result["single"][key]
        assert single.startswith("ok "), (key, single[:500])
        assert result["concurrent"][key] == {single: THREADS * (WARMUP_ROUNDS + ROUNDS)}, key


def test_malformed_requests_are_refused_with_their_named_errors(served):
    import re

    result, expected = served
    malformed = {key: message for key, message in expected.items() if message is not None}
    for key, message in malformed.items():
        # The same refusal alone and under load, every time.
        answers = {result["single"][key], *result["concurrent"][key]}
        assert len(answers) == 1, (key, sorted(answers))
        answer = answers.pop()
        refusal = "ValueError: " if key.startswith("onnx") else "InvalidArgumentError: "
        assert answer.startswith(refusal), (key, answer[:500])
        assert re.search(message, answer), (key, message, answer[:500])


def test_resident_memory_stays_flat_after_warmup(served):
    result, _ = served
    rss = result["rss_kib"]
    assert len(rss) == WARMUP_ROUNDS + ROUNDS
    after_warmup = rss[WARMUP_ROUNDS - 1]
    assert max(rss[WARMUP_ROUNDS:]) <= (1 + RSS_GROWTH) * after_warmup, rss
