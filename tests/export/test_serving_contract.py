"""The TF Serving contract, checked without the server binary: in a fresh process that
imports only tensorflow, tensorflow_text and the serving protos (`serving_contract.py`),
every op of every export is registered and none calls back into Python, both TF's
loader and the TF1 session loader (TF Serving's path) load it, and every warm-up request
replays through the signature it names with the declared outputs.

The fast tests check the float classifier and the int8 classifier with oneDNN's rewrite
off (TensorFlow's default on CPUs without AVX512/AMX); every kind, float and int8 with
the rewrite on and off, runs under `long`.
"""

import os
import shutil

import pytest
import tensorflow as tf

from bert_tf.export import graph_ops
from bert_tf.export.warmup import WARMUP_FILE
from tests.export.export_helpers import TASKS, run_serving_contract

SIGNATURES = ["encode", "serve_token_ids", "serving_default"]
LOADERS = ["saved_model_load", "session"]
WARMUP_BATCH_SIZES = [1, 2, 1, 2]  # short, then full-length requests (bert_tf.export.warmup)
UNKNOWN_OP = "NotARealOp"


def contract_problems(summary):
    """Every way an export's summary breaks the serving contract, as strings."""
    problems = [f"load {loader}: {error}" for loader, error in summary["load_errors"].items()]
    if "ops" not in summary:
        return problems
    problems += [f"unregistered op {found['op']} in {found['function']}"
                 for found in summary["ops"]["unregistered"]]
    problems += [f"Python op {found['op']} in {found['function']}"
                 for found in summary["ops"]["python"]]
    if sorted(summary.get("signatures", {})) != SIGNATURES:
        problems.append(f"signatures {sorted(summary.get('signatures', {}))}")
    warmup = summary.get("warmup") or []
    if [record["batch_size"] for record in warmup] != WARMUP_BATCH_SIZES:
        problems.append(f"warm-up batch sizes {[r['batch_size'] for r in warmup]}")
    for index, record in enumerate(warmup):
        problems += [f"warm-up {index}: {error}" for error in record["request_errors"]]
        if not record["request_errors"] and sorted(record["runs"]) != LOADERS:
            problems.append(f"warm-up {index}: replayed by {sorted(record['runs'])} only")
        for loader, run in record["runs"].items():
            if run["error"]:
                problems.append(f"warm-up {index} ({loader}): {run['error']}")
            problems += [f"warm-up {index} ({loader}): {m}" for m in run["mismatches"]]
    return problems


def _write_warmup(path, requests):
    """`requests`: [(signature name, {input: ndarray-like})] as PredictionLog records."""
    from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

    os.makedirs(os.path.join(path, "assets.extra"), exist_ok=True)
    with tf.io.TFRecordWriter(os.path.join(path, "assets.extra", WARMUP_FILE)) as writer:
        for signature, inputs in requests:
            request = predict_pb2.PredictRequest(
                model_spec=model_pb2.ModelSpec(name="control", signature_name=signature))
            for key, value in inputs.items():
                request.inputs[key].CopyFrom(tf.make_tensor_proto(value))
            writer.write(prediction_log_pb2.PredictionLog(
                predict_log=prediction_log_pb2.PredictLog(request=request)).SerializeToString())


def _control_exports(base, classifier_path):
    """Three SavedModels that break the contract, each in one way (and a warm-up file)."""
    # A Python callback: registered in any Python process, never in the server.
    callback = tf.Module()
    callback.f = tf.function(
        lambda x: {"doubled": tf.numpy_function(lambda v: v * 2, [x], tf.float32)},
        input_signature=[tf.TensorSpec([None], tf.float32, name="x")])
    callback_path = os.path.join(base, "python_callback")
    tf.saved_model.save(callback, callback_path,
                        signatures={"serving_default": callback.f.get_concrete_function()})
    _write_warmup(callback_path, [("", {"x": [1.0, 2.0]})])

    # Outputs without the batch axis, and requests TF Serving refuses.
    batchless = tf.Module()
    batchless.f = tf.function(lambda x: {"total": tf.reduce_sum(x)},
                              input_signature=[tf.TensorSpec([None], tf.float32, name="x")])
    batchless_path = os.path.join(base, "batchless")
    tf.saved_model.save(batchless, batchless_path,
                        signatures={"serving_default": batchless.f.get_concrete_function()})
    _write_warmup(batchless_path, [("serving_default", {"x": [1.0, 2.0]}),
                                   ("serving_default", {"y": [1.0]}),
                                   ("serving_default", {"x": [1, 2]}),
                                   ("classify", {"x": [1.0]})])

    # The classifier with one op, inside a library function, renamed to one nobody registers.
    renamed_path = os.path.join(base, "renamed_op")
    shutil.copytree(classifier_path, renamed_path)
    saved_model = graph_ops.read_saved_model_proto(renamed_path)
    function = next(f for f in saved_model.meta_graphs[0].graph_def.library.function
                    if any(node.op == "BatchMatMulV2" for node in f.node_def))
    next(node for node in function.node_def if node.op == "BatchMatMulV2").op = UNKNOWN_OP
    with open(os.path.join(renamed_path, "saved_model.pb"), "wb") as f:
        f.write(saved_model.SerializeToString())
    return {"python_callback": callback_path, "batchless": batchless_path,
            "renamed_op": renamed_path, "renamed_function": function.signature.name}


@pytest.fixture(scope="module")
def fast_contract(exports, int8_exports, tmp_path_factory):
    """The contract run over the float and int8 classifiers and the controls, oneDNN off."""
    base = tmp_path_factory.mktemp("contract")
    float_path = exports["classifier"][2]
    controls = _control_exports(str(base), float_path)
    paths = {"float": float_path, "int8": int8_exports["classifier"][2],
             **{name: controls[name] for name in ("python_callback", "batchless", "renamed_op")}}
    result = run_serving_contract(list(paths.values()), str(base), onednn=False)
    summaries = {name: result["exports"][path] for name, path in paths.items()}
    return result, summaries, controls


@pytest.mark.slow
def test_the_fresh_process_holds_only_tensorflow_and_its_text_ops(fast_contract):
    result, _, _ = fast_contract
    assert result["modules"] == []  # no bert_tf, no test code
    registry = result["registry"]
    assert registry["serving_protos"] == []  # reading the warm-up file registers no op
    assert "FastWordpieceTokenizeWithOffsets" in registry["text"]
    assert "MatMul" in registry["core"] and "PyFunc" in registry["core"]


@pytest.mark.slow
def test_the_float_export_meets_the_serving_contract(fast_contract):
    _, summaries, _ = fast_contract
    summary = summaries["float"]
    assert contract_problems(summary) == []
    # The walk reached the library: the graph's few nodes call ~150 functions.
    assert summary["ops"]["functions"] > 100 and summary["ops"]["op_types"] > 50
    inputs = summary["signatures"]["serving_default"]["inputs"]
    assert inputs == {"text": {"dtype": "string", "shape": [-1]},
                      "text_pair": {"dtype": "string", "shape": [-1]}}
    first = summary["warmup"][0]
    assert first["signature"] == "serving_default" and first["inputs"] == ["text", "text_pair"]
    assert first["runs"]["session"]["outputs"] == {
        "label": [1], "label_id": [1], "logits": [1, 2], "probabilities": [1, 2]}


@pytest.mark.slow
def test_the_int8_export_meets_the_serving_contract_with_onednn_off(fast_contract):
    """TF Serving's default on a CPU without AVX512/AMX: oneDNN's graph rewrite off."""
    _, summaries, _ = fast_contract
    assert contract_problems(summaries["int8"]) == []


@pytest.mark.slow
def test_the_contract_check_finds_each_broken_control(fast_contract):
    _, summaries, controls = fast_contract
    callback = contract_problems(summaries["python_callback"])
    assert any(p.startswith("Python op PyFunc in __inference_") for p in callback), callback
    assert summaries["python_callback"]["ops"]["unregistered"] == []

    batchless = summaries["batchless"]
    assert batchless["load_errors"] == {} and batchless["ops"]["python"] == []
    records = batchless["warmup"]
    assert records[0]["request_errors"] == []
    for loader in LOADERS:
        assert records[0]["runs"][loader]["mismatches"] == [
            "total: shape [] does not start with the request's batch size 2"]
    assert records[1]["request_errors"] == ["inputs ['y'] != signature inputs ['x']"]
    assert records[2]["request_errors"] == ["x: dtype int32, signature takes float32"]
    assert records[3]["request_errors"] == [
        "no signature 'classify'; the export has ['serving_default']"]

    renamed = summaries["renamed_op"]
    assert renamed["ops"]["unregistered"] == [
        {"op": UNKNOWN_OP, "function": controls["renamed_function"]}]
    assert sorted(renamed["load_errors"]) == LOADERS
    assert all(UNKNOWN_OP in error for error in renamed["load_errors"].values())


@pytest.mark.long
# With the rewrite on (this CPU's default), the fast suite serves int8 exports already.
@pytest.mark.parametrize("onednn", [False, pytest.param(True, marks=pytest.mark.full)],
                         ids=["onednn_off", "onednn_on"])
def test_every_int8_kind_meets_the_serving_contract(int8_exports, tmp_path, onednn):
    paths = {kind: int8_exports[kind][2] for kind in TASKS}
    result = run_serving_contract(list(paths.values()), str(tmp_path), onednn=onednn)
    problems = {kind: contract_problems(result["exports"][path]) for kind, path in paths.items()}
    assert problems == {kind: [] for kind in TASKS}


@pytest.mark.long
def test_every_float_kind_meets_the_serving_contract(exports, tmp_path):
    paths = {kind: exports[kind][2] for kind in TASKS}
    result = run_serving_contract(list(paths.values()), str(tmp_path))
    problems = {kind: contract_problems(result["exports"][path]) for kind, path in paths.items()}
    assert problems == {kind: [] for kind in TASKS}
