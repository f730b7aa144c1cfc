"""`python -m bert_tf.demo`: pretrain a BERT-mini-sized model from scratch, offline.

The README's main job: a BERT of BERT-mini's size (L4/H256/A4) learns masked
LM and next-sentence prediction on a Wikipedia excerpt in two phases, as the
paper trains at length 128 and then 512: 720 steps of batch 128 at length 64,
then 80 steps of batch 64 at length 128 from those weights. How long that takes
depends on the CPU: from the first steps on, the progress bar names the phase
and its ETA covers both phases (`phase_plans`), and a line says what runs
between them. It
  1. finds the Wikipedia pages-articles excerpt that the `gensim` wheel ships
     in its test data (the `demo` extra installs gensim), with importlib.resources;
  2. turns it into a BERT corpus (one sentence per line, blank line between
     articles) with `bert_tf.data.wikipedia`;
  3. learns an uncased WordPiece vocabulary on it;
  4. pretrains the packaged `pretrain/demo` config (MLM + NSP) into
     `<model_dir>/phase1`, then `pretrain/demo_seq128` from its weights into
     --model_dir, leaving checkpoints and TensorBoard logs in both;
  5. ends with one screen: held-out MLM and NSP accuracy at every evaluation,
     beside what a model that learned nothing scores on the same held-out
     batches (always answering the most frequent token, and the more frequent
     NSP label), where the checkpoints and curves are, and what to do next: the
     TensorBoard command, the command that exports the encoder as a raw-text
     SavedModel, and where the evidence of what pretraining buys is documented.
Running it again resumes the run (steps 2 and 3 are skipped when their files exist).
"""

import argparse
import dataclasses
import importlib.resources
import json
import os
import shlex
import sys
import time

from bert_tf import console, storage

# Where a clone of the repository documents the studies (they run from a clone, not an install).
EVIDENCE_DOC = "docs/evidence.md"
DUMP_NAME = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
# Packaged presets (bert_tf.packaged_configs): phase 1, and phase 2 from its weights.
CONFIG = "pretrain/demo"
SECOND_CONFIG = "pretrain/demo_seq128"
NO_SECOND_PHASE = "none"
FIRST_PHASE_DIR = "phase1"  # inside --model_dir, which holds the last phase


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

    storage.makedirs(corpus_dir, exist_ok=True)
    text_path = os.path.join(corpus_dir, "wiki.txt")
    vocab_path = os.path.join(corpus_dir, "vocab.txt")
    if not storage.exists(text_path):
        stats = wikipedia.convert_dump(dump, text_path + ".tmp", processes=2)
        storage.rename(text_path + ".tmp", text_path)
        print(f"corpus: {stats.articles} articles, {stats.sentences} sentences from {dump}")
    if not storage.exists(vocab_path):
        lines = vocab_builder.iter_lines([text_path])
        counts, _ = vocab_builder.count_words(lines, lower_case=True)
        vocab = vocab_builder.build_vocab(counts, vocab_size)
        vocab_builder.write_vocab(vocab, vocab_path + ".tmp")
        storage.rename(vocab_path + ".tmp", vocab_path)
        print(f"vocabulary: {len(vocab)} WordPiece tokens learned from {text_path}")
    return text_path, vocab_path


# At most this many evaluations of a phase on the screen: evenly spaced, always the last.
SCREEN_EVALUATIONS = 10
NSP_ANSWERS = {0: "is next", 1: "not next"}
ACCURACY_TAGS = ("mlm_accuracy", "nsp_accuracy")


@dataclasses.dataclass
class HeldOut:
    """One phase's held-out evaluations, as the screen shows them.

    Attributes:
      length: the phase's sequence length (its evaluations use it too).
      first_step: steps trained before the phase (its steps are shown after them).
      scalars: `{tag: [(step, value), ...]}` of the phase's `eval/` summaries.
      guesses: `PretrainingTask.constant_guesses` on the phase's held-out batches.
    """

    length: int
    first_step: int
    scalars: dict
    guesses: dict


def _evaluations_to_show(steps):
    stride = -(-len(steps) // SCREEN_EVALUATIONS)  # ceil
    shown = steps[::stride]
    return shown if shown[-1] == steps[-1] else shown + [steps[-1]]


def accuracy_table(phases: list[HeldOut], vocab: list[str]) -> list[str]:
    """The screen's held-out accuracy rows, ending with what a constant answer scores.

    Args:
      phases: each phase's evaluations, in training order.
      vocab: the WordPiece vocabulary, to name the guessed token.

    Returns:
      The rows, each a string; none when no phase logged an accuracy.
    """
    columns = [tag for tag in ACCURACY_TAGS if any(p.scalars.get(tag) for p in phases)]
    if not columns:  # evaluations that logged neither accuracy: nothing to tabulate
        return []
    titles = {"mlm_accuracy": "masked LM", "nsp_accuracy": "next sentence"}
    rows = [f"{'held-out accuracy':<22} {'step':>6} {'length':>6}" +
            "".join(f"{titles[tag]:>15}" for tag in columns)]
    guess_rows, answers = [], {}
    for phase in phases:
        values = {tag: dict(phase.scalars.get(tag, [])) for tag in columns}
        steps = sorted(set().union(*values.values()))
        for step in _evaluations_to_show(steps) if steps else []:
            cells = [f"{100 * values[tag][step]:13.1f} %" if step in values[tag]
                     else " " * 15 for tag in columns]
            rows.append(f"{'':<22} {phase.first_step + step:>6,} {phase.length:>6}" +
                        "".join(cells))
        if all(tag in phase.guesses for tag in columns):
            # Phases that evaluate alike share one row.
            guess_rows.append(f"{'':<22} {'guess':>6} {phase.length:>6}" +
                              "".join(f"{100 * phase.guesses[tag].accuracy:13.1f} %"
                                      for tag in columns))
            answers = {"mlm_accuracy": f"always {vocab[phase.guesses['mlm_accuracy'].label]!r}",
                       "nsp_accuracy": f"always "
                                       f"{NSP_ANSWERS[phase.guesses['nsp_accuracy'].label]!r}"
                                       if "nsp_accuracy" in phase.guesses else ""}
    if guess_rows:
        rows += list(dict.fromkeys(guess_rows))
        rows.append(f"{'':<22} (guess: what a model that learned nothing scores, "
                    f"{' and '.join(answers[tag] for tag in columns)})")
    return rows


def export_dir(model_dir):
    """Where the screen's export command writes: `exports/<the run's folder name>`."""
    return os.path.join("exports", os.path.basename(os.path.normpath(model_dir)) or "demo")


@dataclasses.dataclass
class TrainedPhase:
    """One finished phase of the demo.

    Attributes:
      experiment: the phase's resolved pretraining experiment.
      run_dir: its model_dir.
      first_step: steps trained before the phase.
      guesses: `PretrainingTask.constant_guesses` on its held-out batches ({} without
        evaluation).
    """

    experiment: object
    run_dir: str
    first_step: int
    guesses: dict


def _schedule(phases):
    """One line per phase: its steps, batch and length."""
    return [f"{'then ' if i else ''}{p.experiment.trainer.train_steps:,} steps of batch "
            f"{p.experiment.trainer.global_batch_size} at length "
            f"{p.experiment.data.max_seq_length}" for i, p in enumerate(phases)]


def summary_screen(model_dir: str, phases: list[TrainedPhase], seconds: float) -> str:
    """The demo's last screen: what was trained, what it learned, where it is, what next.

    Every command it prints runs on an install of bert_tf with the demo extra.

    Args:
      model_dir: the run directory (the last phase's).
      phases: the phases trained, in order; their held-out accuracies are shown
        beside their constant guesses, the floor to read them against.
      seconds: wall time of this invocation.

    Returns:
      The screen as one string.
    """
    from bert_tf.training.summaries import read_scalars

    experiment = phases[-1].experiment
    encoder = experiment.model.encoder
    held_out = [HeldOut(p.experiment.data.max_seq_length, p.first_step,
                        read_scalars(os.path.join(p.run_dir, "eval")), p.guesses)
                for p in phases]
    path = storage.abspath(model_dir)
    shape = f"L{encoder.num_layers}/H{encoder.hidden_size}/A{encoder.num_heads}"
    lines = ["", "=" * 72, "bert_tf demo: what you got", "=" * 72,
             f"{'model':<22} BERT {shape}, vocab {encoder.vocab_size:,}, MLM + NSP from scratch:"]
    schedule = _schedule(phases)
    schedule[-1] += f" ({seconds / 60:.1f} min this run)"
    lines += [f"{'':<22} {line}" for line in schedule]
    table = []
    if any(h.scalars for h in held_out):
        with storage.open(experiment.data.vocab_file, encoding="utf-8") as f:
            table = accuracy_table(held_out, f.read().splitlines())
    lines += table or ["held-out accuracy      no evaluation was run (trainer.eval_every, "
                       "data.eval_holdout_every)"]
    run = shlex.quote(model_dir)
    lines += [f"checkpoints            {path}  (bert_tf.load_encoder({model_dir!r}))",
              f"curves                 train/ and eval/ of each phase, under {path}",
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


def step_matmul_flops(experiment) -> float:
    """Matmul FLOPs of one training step of a pretraining `experiment`: 3x the forward pass.

    The encoder's dense layers (Q, K, V, output, feed-forward) and attention
    scores for every row at full length, the pooler, and the MLM head over the
    row's prediction slots (more slots in a packed row); the backward pass
    counted as twice the forward. Embedding lookups, softmaxes and layer norms
    are left out: at BERT's sizes the matmuls are nearly all of a step's time.

    Args:
      experiment: a resolved or loaded pretraining experiment.
    """
    from bert_tf.data import packing

    encoder, data = experiment.model.encoder, experiment.data
    h, i, s = encoder.hidden_size, encoder.intermediate_size, data.max_seq_length
    predictions = data.max_predictions_per_seq
    if data.max_sequences_per_row > 1:
        predictions = packing.max_packed_predictions(
            s, data.max_sequences_per_row, predictions, data.masked_lm_prob)
    per_token_layer = 2 * 4 * h * h + 2 * 2 * h * i + 2 * 2 * s * h  # QKVO, FFN, QK^T and PV
    forward = s * encoder.num_layers * per_token_layer + 2 * h * h  # + the pooler
    forward += predictions * (2 * h * h + 2 * h * encoder.vocab_size)  # MLM transform, logits
    return 3.0 * experiment.trainer.global_batch_size * forward


def phase_plans(experiments) -> tuple:
    """The demo's phases as the progress bar plans them (`progress.RunPlan`).

    A phase is named by its length, and its step costs its matmul FLOPs
    (`step_matmul_flops`): phase 2's steps take about phase 1's measured time
    per step times their FLOPs ratio (1.02 for the packaged phases, whose
    steps hold the same tokens; attention and the MLM head grow with length).

    Args:
      experiments: each phase's experiment, in training order.
    """
    from bert_tf.training.progress import PhasePlan

    return tuple(PhasePlan(f"seq {e.data.max_seq_length}", e.trainer.train_steps,
                           step_matmul_flops(e)) for e in experiments)


def phase_title(plans, index: int) -> str:
    """`phase 2/2 (seq 128, 80 steps)`: how the demo's lines name a phase.

    Args:
      plans: every phase's `progress.PhasePlan` (`phase_plans`).
      index: the phase's index in `plans`.
    """
    which = f"phase {index + 1}/{len(plans)}" if len(plans) > 1 else "training"
    return f"{which} ({plans[index].name}, {plans[index].train_steps:,} steps)"


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m bert_tf.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model_dir", default="runs/demo",
                        help="run directory (default runs/demo); corpus and vocab go in "
                             "its corpus/ folder")
    parser.add_argument("--dump", default=None,
                        help="a pages-articles dump to use instead of gensim's excerpt")
    parser.add_argument("--config", default=CONFIG,
                        help=f"phase 1: experiment YAML or packaged preset (default: {CONFIG})")
    parser.add_argument("--second_phase", default=SECOND_CONFIG,
                        help=f"phase 2, from phase 1's weights: experiment YAML or packaged "
                             f"preset (default: {SECOND_CONFIG}); {NO_SECOND_PHASE!r} trains "
                             "phase 1 alone, in --model_dir")
    parser.add_argument("--vocab_size", type=int, default=8000)
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="config override (repeatable)")
    console.add_verbose_flag(parser)
    return parser.parse_args(argv)


def _at_last_step(run_dir, train_steps):
    from bert_tf.checkpoints import readable

    listed = readable.listed_checkpoints(run_dir)
    return bool(listed) and os.path.basename(listed[0]) == f"ckpt-{train_steps}"


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

    from bert_tf import config as config_lib
    from bert_tf import tasks, train

    # JSON is valid YAML: paths with spaces or colons survive the override parser.
    # --set applies to every phase: both train one model on one corpus.
    overrides = [f"data.train_files={json.dumps([text_path])}",
                 f"data.vocab_file={json.dumps(vocab_path)}",
                 f"model.encoder.vocab_size={args.vocab_size}", *args.overrides]
    configs = [args.config]
    run_dirs = [args.model_dir]
    if args.second_phase != NO_SECOND_PHASE:
        configs.append(args.second_phase)
        run_dirs.insert(0, os.path.join(args.model_dir, FIRST_PHASE_DIR))
    try:  # every phase's config, before any training
        loaded = [tasks.load_experiment(config, overrides) for config in configs]
    except (config_lib.ConfigError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    from bert_tf.training.progress import RunPlan

    plans = phase_plans([experiment for _, experiment in loaded])
    started = time.monotonic()
    phases, init_checkpoint, first_step = [], None, 0
    for index, ((task_class, experiment), run_dir) in enumerate(zip(loaded, run_dirs)):
        # The lines between phases: the trainer logs nothing until it builds the model.
        title = phase_title(plans, index)
        print(f"starting {title}: building the model and its input pipeline...", flush=True)
        plan = RunPlan(plans, index, time.monotonic())
        code = train.run(task_class, experiment, run_dir, init_checkpoint, plan=plan)
        trainer = experiment.trainer
        if code != 0 or not _at_last_step(run_dir, trainer.train_steps):
            return code  # failed, or stopped by a signal: a rerun resumes it
        task = task_class(experiment)
        guesses = {}
        if task.has_eval_data and trainer.eval_every:
            batches = f"{trainer.eval_steps} held-out batch{'es' * (trainer.eval_steps != 1)}"
            print(f"{title} done; measuring the constant-guess baselines on its {batches}...",
                  flush=True)
            guesses = task.constant_guesses(
                trainer.eval_batch_size or trainer.global_batch_size, trainer.eval_steps)
        phases.append(TrainedPhase(experiment, run_dir, first_step, guesses))
        init_checkpoint, first_step = run_dir, first_step + trainer.train_steps
    print(summary_screen(args.model_dir, phases, time.monotonic() - started))
    return 0


if __name__ == "__main__":
    sys.exit(main())
