"""Serving profile: where one batch-1 request's time goes, op by op.

    python -m research.bench serving_profile --output_dir DIR [--profile ci]
        [--models_dir DIR] [--requests 64] [--warmup 16]

The models are serving_runtimes' (MiniLM-L6 converted and exported with
`--max_seq_length 128`; the `ci` profile a random BERT-tiny): `--models_dir`
reuses a folder that `python -m research.bench serving_runtimes` made, else
they are made in DIR/models.

For each contender (the float export's `serving_default`, raw text in, and its
`serve_token_ids`; the int8 export's `serve_token_ids`), `--requests` batch-1
requests (GLUE SST-2 dev sentences, the same for every contender) run under
TensorFlow's profiler (`tf.profiler.experimental`, host tracer level 3: every
op the executor runs) after `--warmup` untraced ones. From the trace:

- per request: its wall time (a `TraceMe` around the call), the ops the
  executor ran, and the time inside them (self time: an op's time minus the
  ops nested in it, such as the function-call ops);
- by op type: executions and self time per request; the types are the
  kernels TensorFlow ran after its graph rewrites (`_MklFusedMatMul` is a
  matmul that oneDNN fused with its bias, `_FusedMatMul` the stock fusion),
  which is how the profile shows which patterns were fused;
- the tokenizer's share: the self time of the ops in the name scope of
  `serving_default`'s text-to-ids computation (tokenizer and packer,
  `bert_tf.export.text_inputs.TEXT_TO_IDS_SCOPE`);
- what remains (request time minus op self time): the runtime's own cost per
  request (Python call, argument conversion, function dispatch, scheduling).

Tracing costs time itself (a few microseconds an op), so the profile's
request times are longer than the benchmark's untraced ones; the shares and
counts are what it is for. Writes `results.json` (a rerun skips finished
contenders), `report.md` and `time_by_op_type.png`.
"""

import argparse
import collections
import glob
import json
import os
import re
import shutil
import sys
import tempfile
import time

from bert_tf.export.text_inputs import TEXT_TO_IDS_SCOPE
from research.benchmarks import machine

PROFILES = {
    "full": {"model": "minilm", "requests": 64, "warmup": 16},
    "ci": {"model": "bert_tiny", "requests": 4, "warmup": 2},
}
CONTENDERS = {
    "export_text": ("export_dir", "serving_default"),
    "export_ids": ("export_dir", "serve_token_ids"),
    "export_int8_ids": ("int8_export_dir", "serve_token_ids"),
}
REQUEST_EVENT = "bert_tf_request"
# An executor op event is named "op_name:OpType".
_OP_EVENT = re.compile(r"^(?P<name>[^:\s][^:]*):(?P<type>[A-Za-z_][A-Za-z0-9_]*)$")


def build_parser():
    parser = argparse.ArgumentParser(prog="python -m research.bench serving_profile",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--profile", default="full", choices=sorted(PROFILES))
    parser.add_argument("--models_dir", default=None,
                        help="a models folder of serving_runtimes (default: DIR/models)")
    parser.add_argument("--requests", type=int, default=None,
                        help="traced batch-1 requests per contender (default: the profile's)")
    parser.add_argument("--warmup", type=int, default=None,
                        help="untraced requests first (default: the profile's)")
    parser.add_argument("--contenders", default=",".join(CONTENDERS))
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--vocab_file", default=None,
                        help="vocabulary of the ci profile's random model")
    return parser


def resolve(args):
    """Fills the options left to the profile and checks the contenders; returns `args`."""
    from research.benchmarks import serving_runtimes

    for key, value in PROFILES[args.profile].items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)
    if args.vocab_file is None:
        args.vocab_file = serving_runtimes.build_parser().get_default("vocab_file")
    names = [name.strip() for name in args.contenders.split(",") if name.strip()]
    unknown = [name for name in names if name not in CONTENDERS]
    if unknown or not names:
        raise ValueError(f"--contenders {args.contenders!r}: expected some of {list(CONTENDERS)}")
    args.contender_list = names
    return args


# --- the trace ----------------------------------------------------------------


def trace_requests(function, requests, warmup, log_dir):
    """Runs `function(i)` `warmup` times, then `requests` times under the profiler.

    Returns:
      The path of the trace's `.xplane.pb`.
    """
    import tensorflow as tf

    for index in range(warmup):
        function(index)
    options = tf.profiler.experimental.ProfilerOptions(host_tracer_level=3,
                                                       python_tracer_level=0,
                                                       device_tracer_level=0)
    tf.profiler.experimental.start(log_dir, options=options)
    try:
        for index in range(requests):
            with tf.profiler.experimental.Trace(REQUEST_EVENT, step_num=index, _r=1):
                function(warmup + index)
    finally:
        tf.profiler.experimental.stop()
    paths = glob.glob(os.path.join(log_dir, "plugins", "profile", "*", "*.xplane.pb"))
    if not paths:
        raise RuntimeError(f"the profiler wrote no trace under {log_dir}")
    return max(paths, key=os.path.getmtime)


def host_events(xplane_path):
    """The host plane's events: [(thread_id, start_ps, duration_ps, name)]."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    with open(xplane_path, "rb") as f:
        space.ParseFromString(f.read())
    events = []
    for plane in space.planes:
        if not plane.name.startswith("/host:"):
            continue
        names = {key: value.name for key, value in plane.event_metadata.items()}
        for line in plane.lines:
            # Offsets are relative to the line's timestamp (ns).
            base = line.timestamp_ns * 1000
            events += [(line.id, base + event.offset_ps, event.duration_ps,
                        names.get(event.metadata_id, ""))
                       for event in line.events]
    return events


def self_times(events):
    """Each event with its self time: its duration minus its direct children's on its thread.

    Returns:
      [(name, start_ps, duration_ps, self_ps)].
    """
    by_thread = collections.defaultdict(list)
    for thread, start, duration, name in events:
        by_thread[thread].append((start, -duration, name))
    out = []
    for rows in by_thread.values():
        rows.sort()  # by start; the longer (outer) event first at equal starts
        stack = []  # [index into out, end_ps]
        for start, negative_duration, name in rows:
            duration = -negative_duration
            while stack and stack[-1][1] <= start:
                stack.pop()
            if stack:
                parent = out[stack[-1][0]]
                out[stack[-1][0]] = (*parent[:3], parent[3] - duration)
            out.append((name, start, duration, duration))
            stack.append((len(out) - 1, start + duration))
    return out


def summarise_trace(timed, requests):
    """Per-request figures of one contender's trace (`self_times` rows).

    Returns:
      {"request_ms": p50 wall ms, "mean_request_ms", "ops_per_request", "op_ms_per_request",
       "tokenizer_ms_per_request", "tokenizer_ops_per_request", "by_type":
       {type: {"ops", "ms"}} per request}.
    """
    requests_seen = [row for row in timed if row[0] == REQUEST_EVENT]
    if len(requests_seen) != requests:
        raise RuntimeError(f"expected {requests} traced requests, found {len(requests_seen)}")
    windows = sorted((start, start + duration) for _, start, duration, _ in requests_seen)
    lo, hi = windows[0][0], windows[-1][1]
    by_type = collections.defaultdict(lambda: [0, 0])
    op_ps = tokenizer_ps = tokenizer_ops = op_count = 0
    for name, start, _duration, self_ps in timed:
        match = _OP_EVENT.match(name)
        if not match or not lo <= start <= hi:
            continue
        op_type = match["type"]
        by_type[op_type][0] += 1
        by_type[op_type][1] += self_ps
        op_ps += self_ps
        op_count += 1
        if f"{TEXT_TO_IDS_SCOPE}/" in match["name"]:
            tokenizer_ps += self_ps
            tokenizer_ops += 1
    walls = sorted(duration for _, _, duration, _ in requests_seen)
    per = 1.0 / requests
    return {
        "request_ms": walls[len(walls) // 2] / 1e9,
        "mean_request_ms": sum(walls) / len(walls) / 1e9,
        "ops_per_request": op_count * per,
        "op_ms_per_request": op_ps * per / 1e9,
        "tokenizer_ms_per_request": tokenizer_ps * per / 1e9,
        "tokenizer_ops_per_request": tokenizer_ops * per,
        "by_type": {op_type: {"ops": count * per, "ms": ps * per / 1e9}
                    for op_type, (count, ps) in sorted(by_type.items(),
                                                       key=lambda item: -item[1][1])},
    }


# --- the contenders -----------------------------------------------------------


def contender_function(models, name, sentences, features):
    """`run(i)`: contender `name` on batch-1 request `i` (sentence `i`, cycled)."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the export's text ops)

    attribute, signature_name = CONTENDERS[name]
    loaded = tf.saved_model.load(getattr(models, attribute))
    signature = loaded.signatures[signature_name]
    texts = [tf.constant([sentence]) for sentence in sentences]
    if signature_name == "serving_default":
        def run(index, owner=loaded):
            return signature(text=texts[index % len(texts)])
    else:
        ids = [features(text) for text in texts]

        def run(index, owner=loaded):
            return signature(**ids[index % len(ids)])
    return run


def profile_contender(args, models, name, sentences, features):
    """The trace summary of contender `name` (`summarise_trace`)."""
    function = contender_function(models, name, sentences, features)
    log_dir = tempfile.mkdtemp(prefix=f"profile-{name}-")
    try:
        path = trace_requests(function, args.requests, args.warmup, log_dir)
        return summarise_trace(self_times(host_events(path)), args.requests)
    finally:
        shutil.rmtree(log_dir, ignore_errors=True)


def untraced_request_ms(args, models, name, sentences, features, rounds=3):
    """Median wall ms of a batch-1 request without the profiler (beside the traced one)."""
    function = contender_function(models, name, sentences, features)
    for index in range(args.warmup):
        function(index)
    walls = []
    for _ in range(rounds):
        for index in range(args.requests):
            start = time.perf_counter()
            function(index)
            walls.append(time.perf_counter() - start)
    walls.sort()
    return walls[len(walls) // 2] * 1e3


# --- entry point --------------------------------------------------------------


def settings_of(args):
    return {"model": args.model, "requests": args.requests, "warmup": args.warmup,
            "max_seq_length": args.max_seq_length}


def run(args, log=print):
    """Profiles the contenders not yet in `results.json`; returns the results."""
    from research.benchmarks import serving_profile_report, serving_runtimes

    resolve(args)
    os.makedirs(args.output_dir, exist_ok=True)
    path = os.path.join(args.output_dir, "results.json")
    results = {"contenders": {}}
    if os.path.exists(path):
        with open(path) as f:
            results = json.load(f)
    settings = settings_of(args)
    todo = [name for name in args.contender_list
            if (results["contenders"].get(name) or {}).get("settings") != settings]
    if todo:
        runtime_args = serving_runtimes.resolve(serving_runtimes.build_parser().parse_args(
            ["--output_dir", args.output_dir, "--profile", args.profile,
             "--max_seq_length", str(args.max_seq_length), "--vocab_file", args.vocab_file]
            + (["--models_dir", args.models_dir] if args.models_dir else [])))
        # The SavedModels only: the ONNX exports take longer than the whole profile.
        models = serving_runtimes.prepare_models(runtime_args, log,
                                                 exports=("export", "export_int8"))
        features = serving_runtimes.text_to_ids(models.vocab_file, args.max_seq_length)
        sentences = serving_runtimes.sst2_sentences(args.warmup + args.requests)
    for name in todo:
        log(f"== {name}")
        load_before = round(os.getloadavg()[0], 2)
        start = time.time()
        result = profile_contender(args, models, name, sentences, features)
        result["untraced_request_ms"] = untraced_request_ms(args, models, name, sentences,
                                                            features)
        described = machine.describe()
        result.update(settings=settings, wall_seconds=time.time() - start,
                      machine={**described, "load_average_before": load_before,
                               "onednn_rewrite": serving_runtimes.onednn_rewrite()})
        results["contenders"][name] = result
        with open(path + ".tmp", "w") as f:
            json.dump(results, f, indent=1)
        os.replace(path + ".tmp", path)
    serving_profile_report.write_report(results, args.output_dir)
    return results


def main(argv=None):
    """Command-line entry point; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        run(args, log=lambda message: print(message, flush=True))
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(open(os.path.join(args.output_dir, "report.md")).read())
    return 0


if __name__ == "__main__":
    sys.exit(main())
