"""Serves exports from several threads in a fresh process; prints what every request got as JSON.

Usage: python concurrent_serving.py REQUEST.json
REQUEST.json: {"runtime": "tensorflow" | "onnxruntime",
               "exports": {name: path}, "threads": N, "warmup_rounds": W, "rounds": R,
               "requests": [{"id": str, "export": str, "signature": str,
                             "inputs": {name: {"value": nested list, "dtype": str,
                                               "shape": [int, ...]}}}]}

The tensorflow runtime imports only tensorflow and tensorflow_text (as a model
server does) and calls the SavedModels' signatures. The onnxruntime runtime
imports no TensorFlow: one ONNX Runtime session per model, shared by the
threads, behind the client check of `bert_tf.export.onnx_inputs` (numpy
only), since an ONNX model refuses nothing itself; its one signature is
`serve_token_ids`.

Each request is first answered once, single-threaded. Then each of R rounds
serves one signature of one export after the other: every request to it runs
once on each of N threads (each thread in its own shuffled order), so that the
threads share that signature at once. Once a round is done, VmRSS is sampled. An answer is recorded
as an outcome string: "ok " and a digest of the outputs' exact bytes, or the
error's class and message. Printed: {"single": {id: outcome},
"concurrent": {id: {outcome: count}}, "rss_kib": [after each round],
"max_in_flight": most requests seen running at once}.
"""

import concurrent.futures
import gc
import hashlib
import json
import random
import sys
import threading

import numpy as np


def resident_kib():
    """VmRSS of this process, in KiB."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def tensorflow_signatures(exports):
    """{export: {signature: function(numpy inputs) -> {name: numpy array}}}."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the exports' tokenizer ops)

    def call(signature):
        def run(inputs):
            outputs = signature(**{name: tf.constant(value) for name, value in inputs.items()})
            return {name: value.numpy() for name, value in outputs.items()}
        return run

    return {name: {key: call(signature)
                   for key, signature in tf.saved_model.load(path).signatures.items()}
            for name, path in exports.items()}


def onnxruntime_signatures(exports):
    """{export: {"serve_token_ids": function}}: the client check, then one shared session."""
    import os

    import onnxruntime as ort

    from bert_tf.export.onnx_inputs import MODEL_FILE, check_token_ids, read_metadata

    def call(path):
        metadata = read_metadata(path)
        session = ort.InferenceSession(os.path.join(path, MODEL_FILE),
                                       providers=["CPUExecutionProvider"])
        names = [output.name for output in session.get_outputs()]

        def run(inputs):
            check_token_ids(inputs, metadata)
            return dict(zip(names, session.run(None, inputs), strict=True))
        return run

    return {name: {"serve_token_ids": call(path)} for name, path in exports.items()}


RUNTIMES = {"tensorflow": tensorflow_signatures, "onnxruntime": onnxruntime_signatures}


def outcome(function, inputs):
    """The request's answer as one string: a digest of its outputs, or its error."""
    try:
        outputs = function(inputs)
    except Exception as error:  # every error is an answer to compare, not a crash
        return f"{type(error).__name__}: {error}"
    digest = hashlib.sha256()
    for name in sorted(outputs):
        value = outputs[name]
        digest.update(f"{name} {value.dtype} {value.shape}".encode())
        # String outputs are object arrays: hash their bytes, not their pointers.
        digest.update(repr(value.tolist()).encode() if value.dtype == object
                      else value.tobytes())
    return "ok " + digest.hexdigest()


def main(path):
    with open(path, encoding="utf-8") as f:
        request = json.load(f)
    signatures = RUNTIMES[request["runtime"]](request["exports"])
    calls, by_signature = [], {}
    for item in request["requests"]:
        inputs = {name: np.array(spec["value"], spec["dtype"]).reshape(spec["shape"])
                  for name, spec in item["inputs"].items()}
        by_signature.setdefault((item["export"], item["signature"]), []).append(len(calls))
        calls.append((item["id"], signatures[item["export"]][item["signature"]], inputs))

    single = {key: outcome(function, inputs) for key, function, inputs in calls}

    lock = threading.Lock()
    in_flight = [0, 0]  # now, most at once
    threads = request["threads"]
    # Every batch of orders starts together: without it a thread pool may finish one
    # order of fast requests (a tiny ONNX model, refusals) before the next thread starts,
    # and the run would prove little about requests served side by side.
    start_together = threading.Barrier(threads, timeout=120)

    def serve(order):
        start_together.wait()
        seen = []
        for index in order:
            key, function, inputs = calls[index]
            with lock:
                in_flight[0] += 1
                in_flight[1] = max(in_flight)
            try:
                seen.append((key, outcome(function, inputs)))
            finally:
                with lock:
                    in_flight[0] -= 1
        return seen

    shuffle = random.Random(0)
    concurrent_outcomes = {key: {} for key, _, _ in calls}
    rss = []
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        for _ in range(request["warmup_rounds"] + request["rounds"]):
            for indices in by_signature.values():
                orders = [shuffle.sample(indices, len(indices)) for _ in range(threads)]
                for future in [pool.submit(serve, order) for order in orders]:
                    for key, answer in future.result():
                        counts = concurrent_outcomes[key]
                        counts[answer] = counts.get(answer, 0) + 1
            gc.collect()
            rss.append(resident_kib())
    print(json.dumps({"single": single, "concurrent": concurrent_outcomes, "rss_kib": rss,
                      "max_in_flight": in_flight[1]}))


if __name__ == "__main__":
    main(sys.argv[1])
