"""`python -m bert_tf`: the list of commands, one line each.

The table is static so that listing the commands imports nothing heavy;
a test checks it against the package's runnable modules.
"""

import sys

COMMANDS = {
    "demo": "the main job: pretrain a small BERT from scratch on an offline Wikipedia excerpt",
    "train": "pretrain or fine-tune as an experiment YAML says (resumes from --model_dir)",
    "evaluate": "a fine-tuned run's official metrics on a split or file",
    "predict": "prediction files from a fine-tuned run (GLUE submissions, SQuAD, NER, SWAG)",
    "sweep": "the paper's fine-tuning grid (learning rate x epochs), keeping the best dev score",
    "export": "a model directory -> a versioned raw-text SavedModel for TF Serving",
    "convert": "convert checkpoints between bert_tf, Google TF1, Hugging Face and Model Garden",
    "extract_features": "per-token encoder features of a text file (the feature-based approach)",
    "wikipedia_to_text": "a Wikipedia pages-articles dump -> a one-sentence-per-line corpus",
    "build_vocab": "learn a WordPiece vocab.txt from text files",
    "create_pretraining_data": "statically masked pretraining TFRecords (google-research/bert's)",
    "tokenize": "tokenize text lines with the in-graph WordPiece tokenizer (JSON lines)",
    "show_examples": "a few pretraining examples decoded back to text, masks shown",
    "summary": "build a model and print its structure and parameter count",
}


def usage() -> str:
    """The command list as printed by `python -m bert_tf`."""
    width = max(map(len, COMMANDS))
    lines = [f"  {name:<{width}}  {what}" for name, what in COMMANDS.items()]
    return ("usage: python -m bert_tf.COMMAND [options]   (python -m bert_tf.COMMAND --help "
            "for its options)\n\ncommands:\n" + "\n".join(lines) + "\n")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] not in ("-h", "--help"):
        sys.stderr.write(f"python -m bert_tf takes no command itself; run "
                         f"python -m bert_tf.{argv[0]} instead.\n\n" + usage())
        return 2
    sys.stdout.write(usage())
    return 0


if __name__ == "__main__":
    sys.exit(main())
