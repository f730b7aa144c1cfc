"""Tokenizes text lines with the in-graph BERT tokenizer, one JSON line each.

    python -m bert_tf.tokenize --vocab_file vocab.txt [--cased] [--input FILE]

Reads lines from FILE (stdin when absent) and prints for each
{"text": ..., "tokens": [...], "ids": [...]} without special tokens. Lines
are tokenized in batches by the same `BertTokenizer` graph used for training.
"""

import argparse
import itertools
import json
import sys

from bert_tf import console, storage


def _parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="python -m bert_tf.tokenize",
        description="Print BERT WordPiece tokens and ids of each input line as JSON.",
    )
    parser.add_argument("--vocab_file", required=True, help="BERT vocab.txt, one token per line")
    parser.add_argument(
        "--cased", action="store_true", help="cased vocab: no lower-casing or accent stripping"
    )
    parser.add_argument("--input", help="text file to read (default: stdin)")
    parser.add_argument("--batch_size", type=int, default=1024, help="lines per tokenizer call")
    console.add_verbose_flag(parser)
    args = parser.parse_args(argv)
    if args.batch_size < 1:
        parser.error(f"--batch_size must be >= 1, got {args.batch_size}")
    return args


def _lines(stream):
    """Input lines as bytes, without their line ending."""
    for line in stream:
        if line.endswith(b"\n"):
            line = line[:-1]
            if line.endswith(b"\r"):
                line = line[:-1]
        yield line


def _batches(iterable, size):
    iterator = iter(iterable)
    while batch := list(itertools.islice(iterator, size)):
        yield batch


def main(argv=None):
    """Runs the command line; returns the process exit code."""
    args = _parse_args(argv)
    if not storage.isfile(args.vocab_file):
        print(f"error: vocab file not found: {args.vocab_file}", file=sys.stderr)
        return 2
    if args.input is not None and not storage.isfile(args.input):
        print(f"error: input file not found: {args.input}", file=sys.stderr)
        return 2
    # The quiet console of every command: stderr carries our errors, not TF's start-up.
    console.setup(args.verbose)
    import tensorflow as tf

    from bert_tf.text.tokenizer import BertTokenizer

    try:
        tokenizer = BertTokenizer(args.vocab_file, lower_case=not args.cased)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    # One trace for every batch size.
    tokenize = tf.function(
        tokenizer.tokenize, input_signature=[tf.TensorSpec([None], tf.string)]
    )
    vocab = tokenizer.vocab
    out = sys.stdout.buffer  # UTF-8 whatever the locale
    stream = storage.open(args.input, "rb") if args.input is not None else sys.stdin.buffer
    try:
        for batch in _batches(_lines(stream), args.batch_size):
            for line, ids in zip(batch, tokenize(tf.constant(batch)).to_list()):
                record = {
                    "text": line.decode("utf-8", "replace"),
                    "tokens": [vocab[i] for i in ids],
                    "ids": ids,
                }
                out.write((json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8"))
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
