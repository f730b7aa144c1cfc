"""Learns a BERT WordPiece vocabulary (vocab.txt) from text files.

    python -m bert_tf.build_vocab --input 'corpus/*.txt' --output vocab.txt \
        --vocab_size 30522 [--cased] [--reserved_tokens 99] [--pad_to_multiple_of 128]

Layout: [PAD]=0, [unused0..R-1]=1..R, [UNK], [CLS], [SEP], [MASK], learned
pieces, then [unusedN] padding if asked. Progress goes to stderr, a summary
(lines, words, size, [UNK] rate on the input) to stdout.
"""

import argparse
import sys
import time


def _parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m bert_tf.build_vocab",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--input", required=True, nargs="+", help="text files or glob patterns (quote globs)"
    )
    parser.add_argument("--output", required=True, help="vocab.txt to write")
    parser.add_argument(
        "--vocab_size",
        type=int,
        default=30522,
        help="total size, special and reserved tokens included (default 30522, BERT's)",
    )
    case = parser.add_mutually_exclusive_group()
    case.add_argument(
        "--lower_case",
        dest="lower_case",
        action="store_true",
        default=True,
        help="uncased: lower-case and strip accents (default)",
    )
    case.add_argument(
        "--cased", dest="lower_case", action="store_false", help="keep case and accents"
    )
    parser.add_argument(
        "--reserved_tokens",
        type=int,
        default=99,
        help="[unusedN] slots after [PAD] (default 99, so [UNK]=100 as in BERT)",
    )
    parser.add_argument(
        "--pad_to_multiple_of",
        type=int,
        default=1,
        help="round the size up to a multiple (e.g. 8 or 128) with [unusedN] tokens",
    )
    parser.add_argument("--max_lines", type=int, default=None, help="read at most this many lines")
    parser.add_argument(
        "--max_alphabet",
        type=int,
        default=1000,
        help="keep at most this many distinct characters (the most frequent)",
    )
    parser.add_argument(
        "--progress_interval",
        type=float,
        default=10.0,
        help="seconds between progress lines on stderr (0: at every checkpoint)",
    )
    return parser.parse_args(argv)


def main(argv=None):
    """Builds the vocabulary; returns the process exit code."""
    args = _parse_args(argv)
    # Imported here so `--help` and argument errors answer at once.
    from bert_tf.text import vocab_builder

    started = time.monotonic()
    progress = vocab_builder.Progress(
        lambda message: print(message, file=sys.stderr, flush=True), args.progress_interval
    )
    try:
        if args.max_lines is not None and args.max_lines < 1:
            raise ValueError(f"--max_lines must be positive, got {args.max_lines}.")
        files = vocab_builder.list_text_files(args.input)
        progress.report(f"reading {len(files)} file(s)")
        word_counts, lines = vocab_builder.count_words(
            vocab_builder.iter_lines(files, args.max_lines), args.lower_case, progress
        )
        progress.report(f"counted {len(word_counts):,} distinct words; learning")
        vocab = vocab_builder.build_vocab(
            word_counts,
            args.vocab_size,
            num_reserved=args.reserved_tokens,
            pad_to_multiple_of=args.pad_to_multiple_of,
            max_alphabet=args.max_alphabet,
            progress=progress,
        )
        vocab_builder.write_vocab(vocab, args.output)
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    rate = vocab_builder.unk_rate(word_counts, vocab)
    print(
        f"files: {len(files)}, lines: {lines:,}, words: {sum(word_counts.values()):,} "
        f"({len(word_counts):,} distinct), vocabulary: {len(vocab):,} tokens written to "
        f"{args.output}, [UNK] rate on the input: {rate:.4%}, "
        f"{time.monotonic() - started:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
