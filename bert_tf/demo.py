"""`python -m bert_tf.demo`: pretrain a BERT-mini-sized model from scratch, offline.

The README's main job: a BERT of BERT-mini's size (L4/H256/A4) learns masked
LM and next-sentence prediction on a Wikipedia excerpt, 800 steps of batch
64 at length 128; how long that takes depends on the CPU (the log shows the
progress and an ETA from the first steps on). It
  1. finds the Wikipedia pages-articles excerpt that the `gensim` wheel ships
     in its test data (the `demo` extra installs gensim), with importlib.resources;
  2. turns it into a BERT corpus (one sentence per line, blank line between
     articles) with `bert_tf.data.wikipedia`;
  3. learns an uncased WordPiece vocabulary on it;
  4. pretrains the packaged `pretrain/demo` config (MLM + NSP) with the trainer,
     leaving checkpoints and TensorBoard logs in --model_dir;
  5. ends with one screen: held-out MLM and NSP accuracy at every evaluation,
     beside what a model that learned nothing scores on the same held-out
     batches (always answering the most frequent token, and the more frequent
     NSP label), where the checkpoints and curves are, and what to do next: the
     TensorBoard command, the command that exports the encoder as a raw-text
     SavedModel, and where the evidence of what pretraining buys is documented.
Running it again resumes the run (steps 2 and 3 are skipped when their files exist).
"""

import argparse
import importlib.resources
import json
import os
import shlex
import sys
import time

from bert_tf import console

# Where a clone of the repository documents the studies (they run from a clone, not an install).
EVIDENCE_DOC = "docs/evidence.md"
DUMP_NAME = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
CONFIG = "pretrain/demo"  # a packaged preset (bert_tf.packaged_configs)


def gensim_dump_path():
    """The Wikipedia excerpt inside the installed gensim package."""
    try:
        resource = importlib.resources.files("gensim") / "test" / "test_data" / DUMP_NAME
    except ModuleNotFoundError:
        raise FileNotFoundError(
            "the demo trains on the Wikipedia excerpt that the gensim package ships, and "
            "gensim is not installed: pip install gensim (or pass --dump PATH)") from None
    if not resource.is_file():
        raise FileNotFoundError(f"the installed gensim has no {DUMP_NAME} in its test data; "
                                "pass --dump PATH")
    return str(resource)


def prepare_corpus(dump, corpus_dir, vocab_size):
    """Writes `wiki.txt` and `vocab.txt` into `corpus_dir` (kept if already there)."""
    from bert_tf.data import wikipedia
    from bert_tf.text import vocab_builder

    os.makedirs(corpus_dir, exist_ok=True)
    text_path = os.path.join(corpus_dir, "wiki.txt")
    vocab_path = os.path.join(corpus_dir, "vocab.txt")
    if not os.path.exists(text_path):
        stats = wikipedia.convert_dump(dump, text_path + ".tmp", processes=2)
        os.replace(text_path + ".tmp", text_path)
        print(f"corpus: {stats.articles} articles, {stats.sentences} sentences from {dump}")
    if not os.path.exists(vocab_path):
        lines = vocab_builder.iter_lines([text_path])
        counts, _ = vocab_builder.count_words(lines, lower_case=True)
        vocab = vocab_builder.build_vocab(counts, vocab_size)
        vocab_builder.write_vocab(vocab, vocab_path + ".tmp")
        os.replace(vocab_path + ".tmp", vocab_path)
        print(f"vocabulary: {len(vocab)} WordPiece tokens learned from {text_path}")
    return text_path, vocab_path


# At most this many evaluations on the screen: evenly spaced, always the last.
SCREEN_EVALUATIONS = 10
NSP_ANSWERS = {0: "is next", 1: "not next"}


def _evaluations_to_show(steps):
    stride = -(-len(steps) // SCREEN_EVALUATIONS)  # ceil
    shown = steps[::stride]
    return shown if shown[-1] == steps[-1] else shown + [steps[-1]]


def accuracy_table(held_out, guesses, vocab):
    """The screen's held-out accuracy rows, ending with what a constant answer scores.

    Args:
      held_out: `{tag: [(step, value), ...]}` of the run's `eval/` summaries.
      guesses: `PretrainingTask.constant_guesses` for the same held-out batches.
      vocab: the WordPiece vocabulary, to name the guessed token.

    Returns:
      The rows, each a string.
    """
    columns = [tag for tag in ("mlm_accuracy", "nsp_accuracy") if held_out.get(tag)]
    if not columns:  # evaluations that logged neither accuracy: nothing to tabulate
        return []
    values = {tag: dict(held_out[tag]) for tag in columns}
    steps = sorted(set().union(*values.values()))
    titles = {"mlm_accuracy": "masked LM", "nsp_accuracy": "next sentence"}
    rows = [f"{'held-out accuracy':<22} {'step':>6}" +
            "".join(f"{titles[tag]:>15}" for tag in columns)]
    for step in _evaluations_to_show(steps):
        cells = [f"{100 * values[tag][step]:13.1f} %" if step in values[tag] else " " * 15
                 for tag in columns]
        rows.append(f"{'':<22} {step:>6,}" + "".join(cells))
    if all(tag in guesses for tag in columns):
        rows.append(f"{'':<22} {'guess':>6}" +
                    "".join(f"{100 * guesses[tag].accuracy:13.1f} %" for tag in columns))
        answers = {"mlm_accuracy": f"always {vocab[guesses['mlm_accuracy'].label]!r}",
                   "nsp_accuracy": f"always {NSP_ANSWERS[guesses['nsp_accuracy'].label]!r}"
                                   if "nsp_accuracy" in guesses else ""}
        rows.append(f"{'':<22} (guess: what a model that learned nothing scores, "
                    f"{' and '.join(answers[tag] for tag in columns)})")
    return rows


def export_dir(model_dir):
    """Where the screen's export command writes: `exports/<the run's folder name>`."""
    return os.path.join("exports", os.path.basename(os.path.normpath(model_dir)) or "demo")


def summary_screen(model_dir, experiment, seconds, guesses=None):
    """The demo's last screen: what was trained, what it learned, where it is, what next.

    Every command it prints runs on an install of bert_tf with the demo extra.

    Args:
      model_dir: the run directory.
      experiment: the resolved pretraining experiment.
      seconds: wall time of this invocation.
      guesses: `PretrainingTask.constant_guesses` on the held-out batches, shown
        under the accuracies as the floor to read them against.

    Returns:
      The screen as one string.
    """
    from bert_tf.training.summaries import read_scalars

    encoder, trainer = experiment.model.encoder, experiment.trainer
    held_out = read_scalars(os.path.join(model_dir, "eval"))
    path = os.path.abspath(model_dir)
    shape = f"L{encoder.num_layers}/H{encoder.hidden_size}/A{encoder.num_heads}"
    lines = ["", "=" * 72, "bert_tf demo: what you got", "=" * 72,
             f"{'model':<22} BERT {shape}, vocab {encoder.vocab_size:,}, MLM + NSP from scratch,",
             f"{'':<22} {trainer.train_steps:,} steps of batch {trainer.global_batch_size} "
             f"at length {experiment.data.max_seq_length} ({seconds / 60:.1f} min this run)"]
    if held_out:
        with open(experiment.data.vocab_file, encoding="utf-8") as f:
            vocab = f.read().splitlines()
        lines += accuracy_table(held_out, guesses or {}, vocab)
    else:
        lines.append("held-out accuracy      no evaluation was run (trainer.eval_every, "
                     "data.eval_holdout_every)")
    run = shlex.quote(model_dir)
    lines += [f"checkpoints            {path}  (bert_tf.load_encoder({model_dir!r}))",
              f"curves                 {os.path.join(path, 'train')}, "
              f"{os.path.join(path, 'eval')}",
              f"TensorBoard            tensorboard --logdir {run}",
              f"export for serving     python -m bert_tf.export --model_dir {run} "
              f"--export_dir {shlex.quote(export_dir(model_dir))}",
              "                       (a SavedModel that takes raw text and returns the "
              "encoder's outputs)",
              f"the evidence           {EVIDENCE_DOC} in the bert_tf repository: what "
              "pretraining buys",
              "                       on fine-tuning tasks, measured, with the commands "
              "that re-run it",
              "=" * 72]
    return "\n".join(lines)


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m bert_tf.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model_dir", default="runs/demo",
                        help="run directory (default runs/demo); corpus and vocab go in "
                             "its corpus/ folder")
    parser.add_argument("--dump", default=None,
                        help="a pages-articles dump to use instead of gensim's excerpt")
    parser.add_argument("--config", default=CONFIG,
                        help=f"experiment YAML or packaged preset (default: {CONFIG})")
    parser.add_argument("--vocab_size", type=int, default=8000)
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="config override (repeatable)")
    console.add_verbose_flag(parser)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    console.setup(args.verbose)
    try:
        dump = args.dump or gensim_dump_path()
        text_path, vocab_path = prepare_corpus(
            dump, os.path.join(args.model_dir, "corpus"), args.vocab_size)
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    from bert_tf import tasks, train

    # JSON is valid YAML: paths with spaces or colons survive the override parser.
    overrides = [f"data.train_files={json.dumps([text_path])}",
                 f"data.vocab_file={json.dumps(vocab_path)}",
                 f"model.encoder.vocab_size={args.vocab_size}", *args.overrides]
    task_class, experiment = tasks.load_experiment(args.config, overrides)
    started = time.monotonic()
    code = train.run(task_class, experiment, args.model_dir)
    seconds = time.monotonic() - started
    if code == 0:
        task, trainer = task_class(experiment), experiment.trainer
        guesses = {}
        if task.has_eval_data and trainer.eval_every:
            guesses = task.constant_guesses(
                trainer.eval_batch_size or trainer.global_batch_size, trainer.eval_steps)
        print(summary_screen(args.model_dir, experiment, seconds, guesses))
    return code


if __name__ == "__main__":
    sys.exit(main())
