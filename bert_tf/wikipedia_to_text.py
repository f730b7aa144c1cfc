"""Converts a Wikipedia pages-articles dump into a BERT pretraining corpus.

    python -m bert_tf.wikipedia_to_text --input enwiki-...-pages-articles1.xml.bz2 \
        --output wiki.txt [--titles_output wiki.titles] [--min_chars 200] [--processes 2]

The output has one sentence per line and a blank line between articles (the
format `bert_tf.data.corpus.document_dataset` reads). A summary (pages read,
articles written, sentences) is printed at the end.
"""

import argparse
import sys


def _parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m bert_tf.wikipedia_to_text",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--input", required=True, help="pages-articles dump (.xml, .xml.bz2, .xml.gz)"
    )
    parser.add_argument("--output", required=True, help="text file to write")
    parser.add_argument(
        "--titles_output",
        default=None,
        help="optional file receiving the title of each written article, one per line",
    )
    parser.add_argument(
        "--min_chars",
        type=int,
        default=0,
        help="skip articles with fewer characters of clean text (default: keep any text)",
    )
    parser.add_argument(
        "--processes", type=int, default=1, help="worker processes cleaning pages (default 1)"
    )
    parser.add_argument(
        "--log_every",
        type=int,
        default=10000,
        help="print progress to stderr every N articles (0: never)",
    )
    return parser.parse_args(argv)


def main(argv=None):
    """Runs the conversion; returns the process exit code."""
    args = _parse_args(argv)
    # Imported here so `--help` and argument errors answer at once.
    from bert_tf.data import wikipedia

    try:
        stats = wikipedia.convert_dump(
            args.input,
            args.output,
            min_chars=args.min_chars,
            processes=args.processes,
            titles_path=args.titles_output,
            log_every=args.log_every,
        )
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(stats.summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
