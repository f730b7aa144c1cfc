"""`python -m bert_tf.evaluate`: a fine-tuned run's official metrics.

    python -m bert_tf.evaluate --model_dir runs/sst2 [--split dev] [--input_file FILE] \\
        [--output_dir DIR] [--batch_size 64] [--set data.key=value ...]

Without --split / --input_file: the sources the run evaluated on during
training (GLUE dev, SQuAD's eval_file, CoNLL testa + testb, SWAG's
eval_file). Prints one `name value` line per metric; --output_dir also
writes the predictions and `metrics_<source>.json`.
"""

import argparse
import logging
import os
import sys


def add_source_arguments(parser):
    """The options `evaluate` and `predict` share."""
    parser.add_argument("--model_dir", required=True, help="a fine-tuning run's model_dir")
    parser.add_argument("--split", action="append", default=[],
                        help="GLUE split, e.g. dev, test, dev_matched (repeatable)")
    parser.add_argument("--input_file", action="append", default=[],
                        help="SQuAD JSON, CoNLL or SWAG file (repeatable)")
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="override a value of the run's params.yaml")


def run_and_report(args, output_dir):
    """Runs the model on the chosen sources; prints the metrics; returns the exit code."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from bert_tf import config as config_lib
    from bert_tf.tasks import run_model

    try:
        metrics = run_model.run(args.model_dir, args.split + args.input_file, output_dir,
                                args.batch_size, args.overrides)
    except (config_lib.ConfigError, ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for name, value in sorted(metrics.items()):
        print(f"{name} {value:.4f}")
    if output_dir:
        print(f"predictions written to {os.path.abspath(output_dir)}")
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bert_tf.evaluate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_source_arguments(parser)
    parser.add_argument("--output_dir", default=None, help="also write predictions here")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    return run_and_report(args, args.output_dir)


if __name__ == "__main__":
    sys.exit(main())
