"""Tokenizer throughput: in-graph `BertTokenizer` vs Hugging Face `tokenizers`.

    python -m research.bench tokenizer [--vocab_file V] [--data FILE] [--cased]

Tokenizes every sentence of GLUE SST-2 train (67,349 rows) in batches of
1,024 with both tokenizers in the same process, reports sentences/s and
word pieces/s of each and their ratio (the machines are shared, so only the
ratio of one run is meaningful), and how many sentences get the same ids.
Each figure is the best of `--repeats` full passes, after one warm-up batch.
The optional baseline is tensorflow-text's off-the-shelf `FastBertTokenizer`
(fast but not exact to BERT).
"""

import argparse
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from tests import shared_data  # noqa: E402


def build_parser():
    """Command-line options of the benchmark."""
    parser = argparse.ArgumentParser(
        prog="python -m research.bench tokenizer", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--vocab_file",
        default=shared_data.data_path("vocab", "bert-base-uncased-vocab.txt"),
        help="BERT vocab.txt (default: the shared uncased vocab)",
    )
    parser.add_argument(
        "--data",
        default=shared_data.data_path("glue", "SST-2", "train.tsv"),
        help="GLUE SST-2 style TSV with a 'sentence' column (default: SST-2 train)",
    )
    parser.add_argument("--cased", action="store_true", help="cased vocab (no lower-casing)")
    parser.add_argument("--batch_size", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=3, help="full passes; the best counts")
    parser.add_argument(
        "--no_fast_bert",
        action="store_true",
        help="skip the tensorflow-text FastBertTokenizer baseline",
    )
    return parser


def load_sentences(path):
    """The 'sentence' column of a GLUE TSV file."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"benchmark data not found: {path}")
    with open(path, encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        if "sentence" not in header:
            raise ValueError(f"{path}: no 'sentence' column in header {header}")
        column = header.index("sentence")
        return [line.rstrip("\n").split("\t")[column] for line in f]


def _best_pass(tokenize_batch, batches, repeats):
    """(best seconds over full passes, pieces of one pass)."""
    tokenize_batch(batches[0])  # warm-up: tracing, caches
    best, pieces = float("inf"), 0
    for _ in range(repeats):
        start = time.perf_counter()
        pieces = sum(tokenize_batch(batch) for batch in batches)
        best = min(best, time.perf_counter() - start)
    return best, pieces


def _rates(name, seconds, pieces, sentences):
    return {
        "name": name,
        "seconds": seconds,
        "sentences_per_s": sentences / seconds,
        "tokens_per_s": pieces / seconds,
        "tokens": pieces,
    }


def run(args):
    """Runs the benchmark for parsed `args`; returns the results as a dict."""
    import tensorflow as tf
    import tensorflow_text as tf_text
    from tokenizers import BertWordPieceTokenizer

    from bert_tf.text.tokenizer import BertTokenizer

    sentences = load_sentences(args.data)
    batches = [
        sentences[i : i + args.batch_size] for i in range(0, len(sentences), args.batch_size)
    ]
    lower_case = not args.cased
    results = {"sentences": len(sentences), "batch_size": args.batch_size, "cpus": os.cpu_count()}

    ours = BertTokenizer(args.vocab_file, lower_case=lower_case)
    ours_fn = tf.function(ours.tokenize, input_signature=[tf.TensorSpec([None], tf.string)])
    # Strings start as Python lists for both, so conversion counts for both.
    seconds, pieces = _best_pass(
        lambda b: int(tf.size(ours_fn(tf.constant(b)).values)), batches, args.repeats
    )
    results["ours"] = _rates("bert_tf BertTokenizer", seconds, pieces, len(sentences))

    hf = BertWordPieceTokenizer(args.vocab_file, lowercase=lower_case, strip_accents=lower_case)
    seconds, pieces = _best_pass(
        lambda b: sum(len(e.ids) for e in hf.encode_batch(b, add_special_tokens=False)),
        batches,
        args.repeats,
    )
    results["hf_tokenizers"] = _rates(
        "HF tokenizers BertWordPiece", seconds, pieces, len(sentences)
    )
    results["speedup_vs_hf"] = (
        results["ours"]["sentences_per_s"] / results["hf_tokenizers"]["sentences_per_s"]
    )

    ours_ids = [row for b in batches for row in ours_fn(tf.constant(b)).to_list()]
    hf_ids = [e.ids for b in batches for e in hf.encode_batch(b, add_special_tokens=False)]
    results["same_ids_as_hf"] = sum(a == b for a, b in zip(ours_ids, hf_ids))

    if not args.no_fast_bert:
        fast = tf_text.FastBertTokenizer(
            list(ours.vocab), token_out_type=tf.int32, lower_case_nfd_strip_accents=lower_case
        )
        fast_fn = tf.function(fast.tokenize, input_signature=[tf.TensorSpec([None], tf.string)])
        seconds, pieces = _best_pass(
            lambda b: int(tf.size(fast_fn(tf.constant(b)).values)), batches, args.repeats
        )
        results["fast_bert"] = _rates("tf-text FastBertTokenizer", seconds, pieces, len(sentences))
        fast_ids = [row for b in batches for row in fast_fn(tf.constant(b)).to_list()]
        results["fast_bert_same_ids_as_ours"] = sum(a == b for a, b in zip(ours_ids, fast_ids))
    return results


def format_results(results):
    """Human-readable summary lines."""
    n = results["sentences"]
    lines = [f"{n:,} sentences, batches of {results['batch_size']:,}, {results['cpus']} CPUs"]
    for key in ("ours", "hf_tokenizers", "fast_bert"):
        if key in results:
            r = results[key]
            lines.append(
                f"  {r['name']:30s} {r['sentences_per_s']:>12,.0f} sentences/s "
                f"{r['tokens_per_s']:>14,.0f} tokens/s"
            )
    lines.append(f"  speed-up vs HF tokenizers: {results['speedup_vs_hf']:.2f}x")
    lines.append(f"  same ids as HF tokenizers: {results['same_ids_as_hf']:,} / {n:,}")
    if "fast_bert_same_ids_as_ours" in results:
        lines.append(
            "  FastBertTokenizer same ids as ours: "
            f"{results['fast_bert_same_ids_as_ours']:,} / {n:,}"
        )
    return lines


def main(argv=None):
    """Command-line entry point; returns the exit code."""
    args = build_parser().parse_args(argv)
    for path in (args.vocab_file, args.data):
        if not os.path.isfile(path):
            print(f"error: file not found: {path}", file=sys.stderr)
            return 2
    results = run(args)
    print("\n".join(format_results(results)))
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
