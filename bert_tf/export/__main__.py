"""`python -m bert_tf.export`: a model directory -> a versioned raw-text SavedModel.

    python -m bert_tf.export --model_dir runs/sst2 --export_dir exports/sst2 \\
        [--version N] [--max_seq_length L]
"""

import argparse
import sys

from bert_tf import console


def build_parser():
    """Command-line options."""
    parser = argparse.ArgumentParser(
        prog="python -m bert_tf.export",
        description="Export a bert_tf model directory as a TF Serving SavedModel "
                    "that takes raw text.")
    parser.add_argument("--model_dir", required=True,
                        help="bert_tf model directory (bert_tf_model.json, vocab.txt, ckpt-N)")
    parser.add_argument("--export_dir", required=True,
                        help="EXPORTS/NAME: versions are written as EXPORTS/NAME/<version>")
    parser.add_argument("--version", type=int, default=None,
                        help="version number (default: one more than the highest existing)")
    parser.add_argument("--max_seq_length", type=int, default=None,
                        help="overrides the task's max_seq_length (required when the "
                             "model directory records no task)")
    console.add_verbose_flag(parser)
    return parser


def main(argv=None):
    """Runs the export; returns the process exit code."""
    args = build_parser().parse_args(argv)
    console.setup(args.verbose)
    from bert_tf.export.exporter import export_model_dir

    try:
        path = export_model_dir(args.model_dir, args.export_dir, args.version,
                                args.max_seq_length)
    # OSError covers a missing or unreadable directory and an existing version.
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
