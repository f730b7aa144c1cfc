"""The main job's recipe, change by change: held-out MLM and NSP accuracy of each variant.

    python -m research.bench demo_recipe --output_dir runs/demo_recipe [--profile ci]
        [--variants a,b]

Runs `python -m bert_tf.demo` as a user would (the packaged `pretrain/demo`
configs on gensim's Wikipedia excerpt) once per variant, each variant the
packaged configs plus `--set` overrides: the paper's recipe as the demo ran it
first (one phase at length 128, dropout, 400 steps of batch 128, instances drawn
from windows of 16 documents shuffled in blocks of 1,000), then one change at a
time up to the packaged demo itself (two phases: length 64, then 128). Every
variant evaluates on 8 batches of 128 rows from the same held-out articles at
BERT's 15 % masking (the pairs and masks drawn depend on the variant's length,
window and shuffle settings); the accuracy a model that learned nothing gets on
that variant's batches (always the most frequent token, always the more
frequent NSP label) is computed beside (`PretrainingTask.constant_guesses`).

Writes `results.json`, `report.md` and `accuracy.png` into `--output_dir`, with
one demo run folder per variant (each with a copy of one corpus and vocabulary,
built as the demo builds them). A rerun skips finished variants
and resumes an interrupted one from its checkpoint. Wall times are comparable
only between variants of one run on a quiet machine; the report gives the
machine and its load.
"""

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time

from research.benchmarks import machine

RESULTS_FILE = "results.json"
REPORT_FILE = "report.md"
PLOT_FILE = "accuracy.png"
CORPUS_DIR = "corpus"
LOG_FILE = "demo.log"
TIMES_FILE = "times.jsonl"
CORPUS_TIMES_FILE = "corpus_times.json"
# The demo's first recipe, one phase at length 128, stated as overrides of the packaged
# phase 1 (run with `--second_phase none`), so a variant reads whole.
_ONE_PHASE_128 = ["data.max_seq_length=128", "data.max_predictions_per_seq=20",
                  "data.masked_lm_prob=0.15", "data.eval_max_predictions_per_seq=20",
                  "trainer.global_batch_size=64", "trainer.train_steps=800",
                  "trainer.steps_per_loop=25", "trainer.checkpoint_every=100",
                  "trainer.eval_every=100"]
_PAPER = [*_ONE_PHASE_128,
          "model.encoder.hidden_dropout=0.1", "model.encoder.attention_dropout=0.1",
          "data.documents_per_window=16", "data.shuffle_buffer_size=1000",
          "trainer.global_batch_size=128", "trainer.train_steps=400",
          "trainer.eval_every=50"]
_NO_DROPOUT = ["model.encoder.hidden_dropout=0.0", "model.encoder.attention_dropout=0.0"]
_MIXED = ["data.documents_per_window=64", "data.shuffle_buffer_size=10000"]
# ceil(128 x 0.30) slots, so the rate is not capped.
_MASK_30 = ["data.masked_lm_prob=0.3", "data.max_predictions_per_seq=39"]


@dataclasses.dataclass(frozen=True)
class Variant:
    """One row: the demo with `overrides` (every phase), in one phase or the packaged two."""

    name: str
    label: str
    overrides: list
    two_phases: bool = False


# Each adds one change to the one before.
VARIANTS = [
    Variant("paper", "the paper's recipe (the first demo)", _PAPER),
    Variant("no_dropout", "no dropout", [*_PAPER, *_NO_DROPOUT]),
    Variant("mixed", "+ windows of 64 documents, blocks of 10,000",
            [*_PAPER, *_NO_DROPOUT, *_MIXED]),
    Variant("batch64", "+ batch 64 for 800 steps (the second demo)", _ONE_PHASE_128),
    Variant("mask_30", "+ 30 % masked", [*_ONE_PHASE_128, *_MASK_30]),
    Variant("demo", "+ length 64, then 128 (pretrain/demo, pretrain/demo_seq128)", [],
            two_phases=True),
]
PROFILES = {
    "full": [],
    # Tiny shapes, a few steps: the machinery, not the figures.
    "ci": ["model.encoder.hidden_size=32", "model.encoder.num_layers=2",
           "model.encoder.num_heads=2", "model.encoder.intermediate_size=64",
           "data.max_seq_length=32", "data.max_predictions_per_seq=5",
           "trainer.global_batch_size=8", "trainer.train_steps=4", "trainer.steps_per_loop=2",
           "trainer.eval_every=2", "trainer.checkpoint_every=2", "trainer.eval_steps=1",
           "trainer.eval_batch_size=8", "data.shuffle_buffer_size=100"],
}


def build_parser():
    parser = argparse.ArgumentParser(prog="python -m research.bench demo_recipe",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--output_dir", required=True, help="one demo run per variant, the "
                                                            "results, report and plot")
    parser.add_argument("--profile", choices=sorted(PROFILES), default="full")
    parser.add_argument("--variants", help="run only these (comma-separated), in this order; "
                                           "the report covers every finished one")
    return parser


def variant_overrides(name: str, profile: str) -> list[str]:
    """The `--set` overrides of a variant under a profile (the profile's come last).

    Args:
      name: one of `VARIANTS`' names.
      profile: a key of `PROFILES`.
    """
    return [*_variant(name).overrides, *PROFILES[profile]]


def _variant(name) -> Variant:
    return next(variant for variant in VARIANTS if variant.name == name)


def phase_dirs(output_dir, name) -> list[str]:
    """A variant's run folders, in training order (the last is its --model_dir)."""
    from bert_tf import demo

    model_dir = os.path.join(output_dir, name)
    if _variant(name).two_phases:
        return [os.path.join(model_dir, demo.FIRST_PHASE_DIR), model_dir]
    return [model_dir]


def _run_variant(output_dir, name, profile, log):
    model_dir = os.path.join(output_dir, name)
    if not os.path.isdir(os.path.join(model_dir, CORPUS_DIR)):
        shutil.copytree(os.path.join(output_dir, CORPUS_DIR), os.path.join(model_dir, CORPUS_DIR))
    command = [sys.executable, "-m", "bert_tf.demo", "--model_dir", model_dir]
    if not _variant(name).two_phases:
        command += ["--second_phase", "none"]
    for override in variant_overrides(name, profile):
        command += ["--set", override]
    os.makedirs(model_dir, exist_ok=True)
    log(f"== {name}: {' '.join(command[1:])}")
    started = time.monotonic()
    with open(os.path.join(model_dir, LOG_FILE), "a", encoding="utf-8") as out:
        code = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT,
                              env=dict(os.environ, PYTHONUNBUFFERED="1")).returncode
    seconds = time.monotonic() - started
    if code != 0:
        raise RuntimeError(f"variant {name} failed (exit code {code}); see "
                           f"{os.path.join(model_dir, LOG_FILE)}")
    with open(os.path.join(model_dir, TIMES_FILE), "a", encoding="utf-8") as f:
        f.write(json.dumps({"seconds": round(seconds, 1), "machine": machine.describe()}) + "\n")


def demo_vocab_size() -> int:
    """The demo's default vocabulary size (its `--vocab_size`)."""
    from bert_tf import demo

    return demo.parse_args([]).vocab_size


def _finished(model_dir):
    from bert_tf.training import run_directory

    return run_directory.finished_results(model_dir) is not None


# The training batches' accuracy at the end: the mean of the points logged over this many
# last steps (each point averages one loop of `trainer.steps_per_loop` steps).
TRAINING_TAIL_STEPS = 100


def training_accuracy_at_end(points, train_steps: int) -> float | None:
    """Mean of the training-batch accuracy points in the run's last `TRAINING_TAIL_STEPS`.

    Beside the held-out figure, it tells a model that learned its training articles
    apart from one that learned what carries to unseen articles.

    Args:
      points: `[(step, value), ...]` of one metric in the run's `train/` summaries.
      train_steps: the run's last step.

    Returns:
      The mean, or None when nothing was logged in that window.
    """
    tail = [value for step, value in points if step > train_steps - TRAINING_TAIL_STEPS]
    return sum(tail) / len(tail) if tail else None


ACCURACY_TAGS = ("mlm_accuracy", "nsp_accuracy")


def variant_record(output_dir, name, label):
    """What the report shows of one finished variant: curves, floors, wall time, settings.

    Steps count on across phases (phase 2's step 40 after 720 of phase 1 is 760).
    """
    from bert_tf import tasks
    from bert_tf.training.summaries import read_scalars

    phases, curves, first_step = [], {tag: [] for tag in ACCURACY_TAGS}, 0
    for run_dir in phase_dirs(output_dir, name):
        task_class, experiment = tasks.load_experiment(os.path.join(run_dir, "params.yaml"))
        trainer = experiment.trainer
        guesses = task_class(experiment).constant_guesses(
            trainer.eval_batch_size or trainer.global_batch_size, trainer.eval_steps)
        held_out = read_scalars(os.path.join(run_dir, "eval"))
        for tag in ACCURACY_TAGS:
            curves[tag] += [[first_step + step, value] for step, value in held_out.get(tag, [])]
        phases.append({"first_step": first_step, "train_steps": trainer.train_steps,
                       "batch_size": trainer.global_batch_size,
                       "length": experiment.data.max_seq_length,
                       "guesses": {tag: guess.accuracy for tag, guess in guesses.items()}})
        first_step += trainer.train_steps
    # The training batches of the last phase (run_dir is its folder).
    trained = read_scalars(os.path.join(run_dir, "train"))
    with open(os.path.join(output_dir, name, TIMES_FILE), encoding="utf-8") as f:
        times = [json.loads(line) for line in f if line.strip()]
    return {"name": name, "label": label, "phases": phases, "curves": curves,
            "guesses": phases[-1]["guesses"],
            "training_batches_at_end": {
                tag: training_accuracy_at_end(trained.get(tag, []), trainer.train_steps)
                for tag in ACCURACY_TAGS},
            "seconds": sum(t["seconds"] for t in times),
            "machine": times[-1]["machine"],
            "overrides": variant_overrides(name, "full")}


def tokens_seen(phases, step: int) -> int:
    """Token positions trained on up to a step counted across phases (rows x length)."""
    return sum(min(max(step - p["first_step"], 0), p["train_steps"]) * p["batch_size"] *
               p["length"] for p in phases)


def _phase_of(phases, step):
    return next(p for p in phases if step <= p["first_step"] + p["train_steps"])


def nsp_leaves_chance(record, margin: float = 0.05):
    """The first evaluation with NSP `margin` above its phase's guess, or None."""
    for step, value in record["curves"]["nsp_accuracy"]:
        if value >= _phase_of(record["phases"], step)["guesses"].get("nsp_accuracy", 0.5) + margin:
            return step
    return None


def schedule(phases) -> str:
    """`720 x 128 at 64, then 80 x 64 at 128`: steps x batch at length, per phase."""
    return ", then ".join(f"{p['train_steps']} x {p['batch_size']} at {p['length']}"
                          for p in phases)


def markdown(results):
    lines = ["# The demo's recipe, change by change", "",
             f"Profile `{results['profile']}`. Each row is `python -m bert_tf.demo` with the "
             "packaged configs and the row's overrides (in results.json), in one phase or the "
             "packaged two (length 64, then 128 from its weights; steps count on across "
             "phases). Held-out accuracy on 8 batches of 128 rows from the excerpt's held-out "
             "articles at 15 % masking, at the phase's length (the same articles for every "
             "variant; the pairs and masks depend on its length, window and shuffle "
             "settings). Guess: the score of always giving the most frequent answer on the "
             "variant's own batches (of the last phase at the end). Training batches: the "
             "accuracy logged while training (dropout on where the variant has it), on the "
             "training articles. Share of the run: of its token positions.", "",
             "| variant | steps x batch at length | MLM at the end | NSP at the end | NSP "
             "first 5 points above its guess | NSP on its training batches, last "
             f"{TRAINING_TAIL_STEPS} steps | wall time (machine, load average at its end) |",
             "|---|---|---|---|---|---|---|"]
    for v in results["variants"]:
        mlm, nsp = v["curves"]["mlm_accuracy"], v["curves"]["nsp_accuracy"]
        total = tokens_seen(v["phases"], v["phases"][-1]["first_step"] +
                            v["phases"][-1]["train_steps"])
        above = nsp_leaves_chance(v)
        share = (f"step {above} ({100 * tokens_seen(v['phases'], above) / total:.0f} % of the "
                 "run)" if above else "never")
        trained_nsp = v["training_batches_at_end"]["nsp_accuracy"]
        trained_nsp = "–" if trained_nsp is None else f"{100 * trained_nsp:.1f} %"
        m = v["machine"]
        lines.append(
            f"| {v['label']} | {schedule(v['phases'])} | "
            f"{100 * mlm[-1][1]:.1f} % (guess {100 * v['guesses']['mlm_accuracy']:.1f} %) | "
            f"{100 * nsp[-1][1]:.1f} % (guess {100 * v['guesses']['nsp_accuracy']:.1f} %) | "
            f"{share} | {trained_nsp} | "
            f"{v['seconds'] / 60:.1f} min ({m['cpu']} family {m['cpu_family']} model "
            f"{m['cpu_model']}, {m['load_average']}) |")
    if results["corpus_seconds"] is not None:
        lines += ["", f"Corpus and vocabulary, built once before the variants as the demo builds "
                  f"them: {results['corpus_seconds']:.0f} s. A variant's wall time is its "
                  "`python -m bert_tf.demo` process with them in place."]
    lines += ["", f"Plot: `{PLOT_FILE}` (held-out accuracy against token positions seen).", ""]
    return "\n".join(lines)


def plot(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    for ax, tag, title in zip(axes, ACCURACY_TAGS, ("masked LM", "NSP")):
        for v in results["variants"]:
            points = v["curves"][tag]
            ax.plot([tokens_seen(v["phases"], step) / 1e6 for step, _ in points],
                    [100 * value for _, value in points], "-o", markersize=3, label=v["label"])
        ax.set_title(f"held-out {title} accuracy")
        ax.set_xlabel("million token positions seen")
        ax.set_ylabel("%")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(args, log=print):
    names = [variant.name for variant in VARIANTS]
    chosen = [n.strip() for n in args.variants.split(",")] if args.variants else names
    unknown = sorted(set(chosen) - set(names))
    if unknown:
        raise ValueError(f"unknown variant(s) {unknown}; variants: {names}")
    from bert_tf import demo

    os.makedirs(args.output_dir, exist_ok=True)
    # One corpus and vocabulary for every variant, built as the demo builds its own (and
    # timed: a user's demo builds them before it trains).
    corpus_dir = os.path.join(args.output_dir, CORPUS_DIR)
    if not os.path.isdir(corpus_dir):
        started = time.monotonic()
        demo.prepare_corpus(demo.gensim_dump_path(), corpus_dir, demo_vocab_size())
        with open(os.path.join(args.output_dir, CORPUS_TIMES_FILE), "w", encoding="utf-8") as f:
            json.dump({"seconds": round(time.monotonic() - started, 1),
                       "machine": machine.describe()}, f)
    for name in chosen:
        if _finished(os.path.join(args.output_dir, name)):
            log(f"== {name}: finished")
        else:
            _run_variant(args.output_dir, name, args.profile, log)
    corpus_times = os.path.join(args.output_dir, CORPUS_TIMES_FILE)
    corpus_seconds = None
    if os.path.isfile(corpus_times):
        with open(corpus_times, encoding="utf-8") as f:
            corpus_seconds = json.load(f)["seconds"]
    results = {"benchmark": "demo_recipe", "profile": args.profile,
               "corpus_seconds": corpus_seconds,
               "variants": [variant_record(args.output_dir, v.name, v.label) for v in VARIANTS
                            if _finished(os.path.join(args.output_dir, v.name))]}
    with open(os.path.join(args.output_dir, RESULTS_FILE), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)
    with open(os.path.join(args.output_dir, REPORT_FILE), "w", encoding="utf-8") as f:
        f.write(markdown(results))
    plot(results, os.path.join(args.output_dir, PLOT_FILE))
    return results


def main(argv=None):
    """Command-line entry point; returns the exit code."""
    args = build_parser().parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        run(args, log=lambda m: print(m, flush=True))
    except (ValueError, FileNotFoundError, RuntimeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    with open(os.path.join(args.output_dir, REPORT_FILE), encoding="utf-8") as f:
        print(f.read())
    return 0


if __name__ == "__main__":
    sys.exit(main())
