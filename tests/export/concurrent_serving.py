"""Serves exports from several threads in a process importing only tensorflow and
tensorflow_text; prints what every request got as JSON.

Usage: python concurrent_serving.py REQUEST.json
REQUEST.json: {"exports": {kind: path}, "threads": N, "warmup_rounds": W, "rounds": R,
               "requests": [{"id": str, "kind": str, "signature": str,
                             "inputs": {name: {"value": nested list, "dtype": str,
                                               "shape": [int, ...]}}}]}

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
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the exports' tokenizer ops)


def resident_kib():
    """VmRSS of this process, in KiB."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def outcome(function, inputs):
    """The request's answer as one string: a digest of its outputs, or its error."""
    try:
        outputs = function(**inputs)
    except Exception as error:  # every error is an answer to compare, not a crash
        return f"{type(error).__name__}: {error}"
    digest = hashlib.sha256()
    for name in sorted(outputs):
        value = outputs[name].numpy()
        digest.update(f"{name} {value.dtype} {value.shape}".encode())
        # String outputs are object arrays: hash their bytes, not their pointers.
        digest.update(repr(value.tolist()).encode() if value.dtype == object
                      else value.tobytes())
    return "ok " + digest.hexdigest()


def main(path):
    with open(path, encoding="utf-8") as f:
        request = json.load(f)
    signatures = {kind: tf.saved_model.load(export).signatures
                  for kind, export in request["exports"].items()}
    calls, by_signature = [], {}
    for item in request["requests"]:
        inputs = {name: tf.constant(np.array(spec["value"], spec["dtype"]).reshape(spec["shape"]))
                  for name, spec in item["inputs"].items()}
        by_signature.setdefault((item["kind"], item["signature"]), []).append(len(calls))
        calls.append((item["id"], signatures[item["kind"]][item["signature"]], inputs))

    single = {key: outcome(function, inputs) for key, function, inputs in calls}

    lock = threading.Lock()
    in_flight = [0, 0]  # now, most at once

    def serve(order):
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
    threads = request["threads"]
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
