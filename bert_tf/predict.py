"""`python -m bert_tf.predict`: prediction files from a fine-tuned run.

    python -m bert_tf.predict --model_dir runs/sst2 --output_dir preds [--split test]
    python -m bert_tf.predict --model_dir runs/squad --output_dir preds --input_file dev-v1.1.json

Writes what each benchmark's scorer or leaderboard takes: GLUE submission
TSVs (SST-2.tsv, MNLI-m.tsv, ...), SQuAD `predictions.json` (+ n-best and,
for v2.0, `null_odds.json`), CoNLL `word gold predicted` lines for
conlleval, SWAG per-example choice probabilities; a labelled GLUE split
(--split dev) gives `<TASK>_<split>_predictions.tsv` (id, prediction, gold
label). GLUE defaults to the task's test split(s); the other tasks need
--input_file. Metrics are printed too when the input has labels. Options
that cannot work together are refused before the model is loaded.
"""

import argparse
import sys

from bert_tf.evaluate import add_source_arguments, run_and_report


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bert_tf.predict", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_source_arguments(parser)
    parser.add_argument("--output_dir", required=True, help="where prediction files go")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    return run_and_report(args, args.output_dir, predicting=True)


if __name__ == "__main__":
    sys.exit(main())
