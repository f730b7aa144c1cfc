"""What TF Serving's model server would do with SavedModels, checked in a process that
imports only tensorflow, tensorflow_text and tensorflow_serving's protos; prints a JSON summary.

Usage: python serving_contract.py REQUEST.json
REQUEST.json: {"exports": [path, ...], "python_ops": [op type, ...]}

The model server links TensorFlow core plus tensorflow_text's ops (the Python
package's callback ops aside), so this process's op registry stands for the
server's. For each export:

* ops: every node of every meta graph's graph_def and of each function of its
  library (read from saved_model.pb) is looked up in the registry. Reported:
  `unregistered` and `python` (an op type of "python_ops", registered here by
  the Python package only), each as {"op", "function"} ("<graph>" for the top
  graph). A node that calls a library function by name is a call, not an op.
* load: `tf.saved_model.load`, then TF Serving's own path: the meta graph
  tagged "serve" imported into a TF1 session, variables restored and its init
  op run (`tf.compat.v1.saved_model.load`), as the C++ loader does.
* warmup: every PredictionLog of assets.extra/tf_serving_warmup_requests is
  replayed through the signature its request names ("serving_default" when
  empty), by both loaders: through the loaded signature function, and with
  `Session.run` on the SignatureDef's tensor names, as TF Serving's Predict
  does. Each output is checked against the SignatureDef's declared dtype and
  shape, and its first dimension against the request's batch size (REST row
  format needs it). Per record: {"signature", "batch_size", "inputs",
  "request_errors", "runs": {loader: {"error", "mismatches", "outputs"}}}.

Printed: {"modules": bert_tf/tests modules imported (must be none),
"registry": {"core": op names registered by tensorflow, "serving_protos": names
the serving protos' import added, "text": names tensorflow_text's added},
"exports": {path: summary}}. Errors are caught and reported, never raised.
"""

import functools
import json
import os
import sys

import tensorflow as tf
from tensorflow.core.framework import op_def_pb2
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow.python.client import pywrap_tf_session
from tensorflow.python.framework import op_def_registry

WARMUP_PATH = os.path.join("assets.extra", "tf_serving_warmup_requests")
SERVE_TAG = "serve"
DEFAULT_SIGNATURE = "serving_default"
# Not a signature clients call: the init op the loaders run (TF Serving's included).
INIT_OP_SIGNATURE = "__saved_model_init_op"
TOP_GRAPH = "<graph>"


def _registered_ops():
    """Every op name in this process's registry."""
    buffer = pywrap_tf_session.TF_GetBuffer(pywrap_tf_session.TF_GetAllOpList())
    return {op.name for op in op_def_pb2.OpList.FromString(buffer).op}


CORE_OPS = _registered_ops()
from tensorflow_serving.apis import prediction_log_pb2  # noqa: E402  (after counting the ops)

SERVING_PROTO_OPS = _registered_ops()
import tensorflow_text  # noqa: E402, F401  (registers the tokenizer ops)

TEXT_OPS = _registered_ops()


def _error(e):
    """One line: the exception's class, its message's first and last lines (TF puts the
    failing node last)."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()] or [""]
    message = lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1]}"
    return f"{type(e).__name__}: {message[:800]}"


def check_ops(saved_model, python_ops):
    """{"nodes", "functions", "op_types", "unregistered", "python"} over every graph function."""
    unregistered, python, op_types = [], [], set()
    nodes = functions = 0
    for meta_graph in saved_model.meta_graphs:
        library = meta_graph.graph_def.library
        function_names = {function.signature.name for function in library.function}
        graphs = [(TOP_GRAPH, meta_graph.graph_def.node)]
        graphs += [(function.signature.name, function.node_def) for function in library.function]
        functions += len(library.function)
        for function_name, graph_nodes in graphs:
            for node in graph_nodes:
                nodes += 1
                if node.op in function_names:
                    continue
                op_types.add(node.op)
                found = {"op": node.op, "function": function_name}
                if op_def_registry.get(node.op) is None:
                    if found not in unregistered:
                        unregistered.append(found)
                elif node.op in python_ops and found not in python:
                    python.append(found)
    return {"nodes": nodes, "functions": functions, "op_types": len(op_types),
            "unregistered": unregistered, "python": python}


def _tensor_info(info):
    """{"dtype", "shape"} of a SignatureDef TensorInfo (shape None for unknown rank)."""
    shape = None if info.tensor_shape.unknown_rank else [d.size for d in info.tensor_shape.dim]
    return {"dtype": tf.dtypes.as_dtype(info.dtype).name, "shape": shape}


def signature_contract(meta_graph):
    """{name: {"inputs", "outputs": {key: {"dtype", "shape"}}}} from the SignatureDefs."""
    return {name: {"inputs": {k: _tensor_info(v) for k, v in sorted(sig.inputs.items())},
                   "outputs": {k: _tensor_info(v) for k, v in sorted(sig.outputs.items())}}
            for name, sig in sorted(meta_graph.signature_def.items())
            if name != INIT_OP_SIGNATURE}


def output_mismatches(outputs, declared, batch_size):
    """Problems of `outputs` ({key: ndarray}) against the declared outputs, as strings."""
    problems = []
    if sorted(outputs) != sorted(declared):
        problems.append(f"output keys {sorted(outputs)} != declared {sorted(declared)}")
    for key in sorted(set(outputs) & set(declared)):
        value, want = outputs[key], declared[key]
        dtype = tf.dtypes.as_dtype(value.dtype).name
        if value.dtype == object:
            dtype = "string"
        if dtype != want["dtype"]:
            problems.append(f"{key}: dtype {dtype}, declared {want['dtype']}")
        if want["shape"] is not None and (
                len(want["shape"]) != value.ndim
                or any(d not in (-1, got) for d, got in zip(want["shape"], value.shape))):
            problems.append(f"{key}: shape {list(value.shape)}, declared {want['shape']}")
        if value.ndim == 0 or value.shape[0] != batch_size:
            problems.append(f"{key}: shape {list(value.shape)} does not start with the "
                            f"request's batch size {batch_size}")
    return problems


def _run(call, declared, batch_size):
    """{"error", "mismatches", "outputs"} of one replay by one loader."""
    try:
        outputs = call()
    except Exception as e:  # noqa: BLE001  (a failed request is what is reported)
        return {"error": _error(e), "mismatches": [], "outputs": {}}
    return {"error": None, "mismatches": output_mismatches(outputs, declared, batch_size),
            "outputs": {k: list(v.shape) for k, v in sorted(outputs.items())}}


def replay_warmup(path, meta_graph, loaded, session):
    """One result per warm-up record (see the module docstring)."""
    warmup_file = os.path.join(path, WARMUP_PATH)
    if not os.path.isfile(warmup_file):
        return None
    signatures = signature_contract(meta_graph)
    results = []
    for raw in tf.data.TFRecordDataset(warmup_file).as_numpy_iterator():
        log = prediction_log_pb2.PredictionLog.FromString(raw)
        kind = log.WhichOneof("log_type")
        if kind != "predict_log":
            results.append({"signature": None, "batch_size": None, "inputs": [],
                            "request_errors": [f"{kind}: only predict_log is replayed"],
                            "runs": {}})
            continue
        request = log.predict_log.request
        name = request.model_spec.signature_name or DEFAULT_SIGNATURE
        inputs = {k: tf.make_ndarray(v) for k, v in sorted(request.inputs.items())}
        sizes = sorted({v.shape[0] for v in inputs.values() if v.ndim})
        result = {"signature": name, "batch_size": sizes[0] if len(sizes) == 1 else None,
                  "inputs": sorted(inputs), "request_errors": [], "runs": {}}
        results.append(result)
        if name not in signatures:
            result["request_errors"].append(f"no signature {name!r}; "
                                            f"the export has {sorted(signatures)}")
            continue
        declared = signatures[name]
        # TF Serving's Predict refuses a request whose inputs are not the signature's.
        if sorted(inputs) != sorted(declared["inputs"]):
            result["request_errors"].append(
                f"inputs {sorted(inputs)} != signature inputs {sorted(declared['inputs'])}")
        for key in sorted(set(inputs) & set(declared["inputs"])):
            dtype = tf.dtypes.as_dtype(request.inputs[key].dtype).name
            if dtype != declared["inputs"][key]["dtype"]:
                result["request_errors"].append(
                    f"{key}: dtype {dtype}, signature takes {declared['inputs'][key]['dtype']}")
        if len(sizes) != 1:
            result["request_errors"].append(f"inputs of batch sizes {sizes}")
        if result["request_errors"]:
            continue
        batch_size = sizes[0]
        if loaded is not None:
            result["runs"]["saved_model_load"] = _run(
                functools.partial(_call_function, loaded.signatures[name], inputs),
                declared["outputs"], batch_size)
        if session is not None:
            result["runs"]["session"] = _run(
                functools.partial(_call_session, session, meta_graph.signature_def[name],
                                  inputs),
                declared["outputs"], batch_size)
    return results


def _call_function(function, inputs):
    """{output: ndarray} of a loaded signature function on {input: ndarray}."""
    outputs = function(**{key: tf.constant(value) for key, value in inputs.items()})
    return {key: value.numpy() for key, value in outputs.items()}


def _call_session(session, signature_def, inputs):
    """As TF Serving's Predict: the SignatureDef's tensor names fed and fetched."""
    fetches = {key: info.name for key, info in signature_def.outputs.items()}
    return session.run(fetches, {signature_def.inputs[key].name: value
                                 for key, value in inputs.items()})


def _serve_meta_graph(saved_model):
    for meta_graph in saved_model.meta_graphs:
        if SERVE_TAG in meta_graph.meta_info_def.tags:
            return meta_graph
    return None


def check_export(path, python_ops):
    """The summary of one export (see the module docstring)."""
    summary = {"load_errors": {}}
    try:
        with open(os.path.join(path, "saved_model.pb"), "rb") as f:
            saved_model = saved_model_pb2.SavedModel.FromString(f.read())
    except (OSError, ValueError) as e:
        summary["load_errors"]["saved_model.pb"] = _error(e)
        return summary
    summary["ops"] = check_ops(saved_model, python_ops)
    meta_graph = _serve_meta_graph(saved_model)
    if meta_graph is None:
        summary["load_errors"]["tags"] = f"no meta graph tagged {SERVE_TAG!r}"
        return summary
    summary["signatures"] = signature_contract(meta_graph)
    loaded = session = None
    try:
        loaded = tf.saved_model.load(path)
    except Exception as e:  # noqa: BLE001
        summary["load_errors"]["saved_model_load"] = _error(e)
    graph = tf.Graph()
    session = tf.compat.v1.Session(graph=graph)
    try:
        with graph.as_default():
            tf.compat.v1.saved_model.load(session, [SERVE_TAG], path)
    except Exception as e:  # noqa: BLE001
        summary["load_errors"]["session"] = _error(e)
        session.close()
        session = None
    summary["warmup"] = replay_warmup(path, meta_graph, loaded, session)
    if session is not None:
        session.close()
    return summary


def main(request_path):
    with open(request_path, encoding="utf-8") as f:
        request = json.load(f)
    python_ops = set(request["python_ops"])
    result = {
        "modules": sorted(name for name in sys.modules
                          if name.split(".")[0] in ("bert_tf", "tests", "research")),
        "registry": {"core": sorted(CORE_OPS),
                     "serving_protos": sorted(SERVING_PROTO_OPS - CORE_OPS),
                     "text": sorted(TEXT_OPS - SERVING_PROTO_OPS)},
        "exports": {path: check_export(path, python_ops) for path in request["exports"]},
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1])
