"""Step-for-step parity of our pretraining with Model Garden's, the TF reference.

    python -m research.bench parity --output_dir runs/parity [--batch_size 16]
        [--exact_steps 100] [--dropout_steps 2000] [--controls ln_decay,mlm_token_mean]

Trains our `BertPretrainer` (our `TrainStep`, pretraining task and AdamW)
and Model Garden's `BertPretrainerV2` (its `MaskedLMTask.train_step` and
losses, its `OptimizerFactory` AdamW) from the same initial weights (ours,
exported with `checkpoints.model_garden`, heads copied) on the same batches
(materialised once from our pipeline on real text into `batches.npz`).

Parts, each skipped when a rerun finds it finished:
  1. exact: dropout off, fp32, `--exact_steps` steps; per-step total, MLM and
     NSP losses must agree within `--loss_rtol` (relative) and every weight
     element within `--weight_tol` times the summed learning rates.
  2. controls: deliberately wrong variants of ours over the same steps,
     compared with the same Garden run; each must be reported as diverging.
  3. dropout: dropout on (each stack its own RNG), `--dropout_steps` steps,
     checkpointed every `--checkpoint_every` steps; the trailing-mean MLM loss
     curves must stay within `--curve_rtol` of each other everywhere.

Writes `results.json`, `report.md`, `exact_losses.png` and `dropout_mlm.png`
into `--output_dir`. The exit code is 0 when parity holds and every control
diverges, 1 otherwise.
"""

import argparse
import glob
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

from tests import shared_data  # noqa: E402

# BERT's corpus format already (one sentence per line, blank line between documents).
DEFAULT_CORPUS = ("corpus/sample_text.txt",)
# One document of prose per file, split into sentences before use.
DEFAULT_PROSE = ("corpus/sotu/*.txt",)
DEFAULT_VOCAB = "vocab/bert-base-uncased-vocab.txt"
LOSS_KEYS = ("loss", "mlm_loss", "nsp_loss")


def build_parser():
    """Command-line options of the parity harness (defaults: BERT-mini, seq 128)."""
    parser = argparse.ArgumentParser(
        prog="python -m research.bench parity", description=__doc__.split("\n\n")[0])
    parser.add_argument("--output_dir", required=True,
                        help="results, plots, batches and checkpoints (a rerun resumes)")
    shapes = parser.add_argument_group("shapes (default BERT-mini L4/H256/A4)")
    shapes.add_argument("--num_layers", type=int, default=4)
    shapes.add_argument("--hidden_size", type=int, default=256)
    shapes.add_argument("--num_heads", type=int, default=4)
    shapes.add_argument("--intermediate_size", type=int, default=1024)
    shapes.add_argument("--seq_length", type=int, default=128)
    shapes.add_argument("--max_predictions", type=int, default=20)
    shapes.add_argument("--batch_size", type=int, default=16)
    run = parser.add_argument_group("run")
    run.add_argument("--exact_steps", type=int, default=100)
    run.add_argument("--dropout_steps", type=int, default=2000,
                     help="steps of the dropout-on part (0 skips it)")
    run.add_argument("--dropout", type=float, default=0.1,
                     help="hidden and attention dropout of the dropout-on part")
    run.add_argument("--learning_rate", type=float, default=5e-4)
    run.add_argument("--warmup_fraction", type=float, default=0.1,
                     help="warmup steps as a fraction of each part's steps (then linear "
                          "decay to 0 at the part's last step)")
    run.add_argument("--controls", default="ln_decay,mlm_token_mean",
                     help="comma-separated wrong variants of ours that must diverge "
                          "(empty: none)")
    run.add_argument("--checkpoint_every", type=int, default=100)
    run.add_argument("--seed", type=int, default=0)
    data = parser.add_argument_group("data")
    data.add_argument("--corpus", default=",".join(DEFAULT_CORPUS),
                      help="comma-separated globs, relative to the shared data folder "
                           f"({shared_data.data_dir()}) unless absolute")
    data.add_argument("--prose", default=",".join(DEFAULT_PROSE),
                      help="comma-separated globs of prose files (one document each), "
                           "written one sentence per line into OUTPUT_DIR/corpus first")
    data.add_argument("--vocab_file", default=DEFAULT_VOCAB)
    limits = parser.add_argument_group("pass criteria")
    limits.add_argument("--loss_rtol", type=float, default=1e-4)
    limits.add_argument("--weight_tol", type=float, default=1e-3,
                        help="after the exact part, every weight element of ours and "
                             "Garden's may differ by at most this fraction of the summed "
                             "learning rates (the scale of Adam's total movement)")
    limits.add_argument("--curve_rtol", type=float, default=0.02)
    limits.add_argument("--smoothing", type=int, default=100,
                        help="trailing-mean window of the dropout-on MLM curves")
    return parser


# --- configuration ---------------------------------------------------------------


def _data_path(path):
    return path if os.path.isabs(path) else shared_data.data_path(path)


def encoder_config(args, dropout):
    """Our encoder config for the run: tanh GELU (Garden's), BERT's type vocab of 2."""
    from bert_tf.models.encoder_config import EncoderConfig
    from bert_tf.text import tokenizer_contract

    vocab_size = tokenizer_contract.contract_from_vocab(_data_path(args.vocab_file),
                                                        True)["vocab_size"]
    return EncoderConfig(
        vocab_size=vocab_size, hidden_size=args.hidden_size, num_layers=args.num_layers,
        num_heads=args.num_heads, intermediate_size=args.intermediate_size,
        hidden_act="gelu_tanh", hidden_dropout=dropout, attention_dropout=dropout,
        max_position_embeddings=max(512, args.seq_length), type_vocab_size=2)


def stack_config(args, steps, dropout):
    from research.benchmarks.parity_stacks import StackConfig

    return StackConfig(encoder=encoder_config(args, dropout), learning_rate=args.learning_rate,
                       warmup_steps=max(1, int(round(args.warmup_fraction * steps))),
                       decay_steps=steps)


# --- batches --------------------------------------------------------------------


def materialise_batches(path, args, num_batches, log=print):
    """`num_batches` batches of our pipeline, saved once to `path` (npz) and reused."""
    if os.path.exists(path):
        with np.load(path) as saved:
            batches = {k: saved[k] for k in saved.files}
        if len(batches["input_ids"]) >= num_batches:
            return {k: v[:num_batches] for k, v in batches.items()}
        log(f"{path} holds {len(batches['input_ids'])} batches; rebuilding {num_batches}")
    import tensorflow as tf

    from bert_tf.data.pretraining import PretrainingOptions, pretraining_dataset
    from bert_tf.text.tokenizer import BertTokenizer

    patterns = [_data_path(p) for p in args.corpus.split(",") if p]
    prose = [_data_path(p) for p in args.prose.split(",") if p]
    missing = [p for p in patterns + prose if not glob.glob(p)]
    if missing:
        raise FileNotFoundError(f"--corpus/--prose patterns match no file: {missing}")
    if prose:
        from bert_tf.data.sentence_split import write_sentence_per_line

        folder = os.path.join(os.path.dirname(path), "corpus")
        os.makedirs(folder, exist_ok=True)
        write_sentence_per_line(sorted(f for p in prose for f in glob.glob(p)), folder)
        patterns.append(os.path.join(folder, "*"))
    vocab_file = _data_path(args.vocab_file)
    start = time.perf_counter()
    options = PretrainingOptions(
        max_seq_length=args.seq_length, max_predictions_per_seq=args.max_predictions,
        seed=args.seed, shuffle_buffer_size=1000)
    dataset = pretraining_dataset(
        patterns, BertTokenizer(vocab_file, lower_case=True), vocab_file,
        batch_size=args.batch_size, options=options, num_epochs=None)
    collected = {}
    for batch in dataset.take(num_batches):
        for key, value in batch.items():
            collected.setdefault(key, []).append(value.numpy())
    batches = {k: np.stack(v) for k, v in collected.items()}  # [steps, B, ...]
    tmp = path + ".tmp.npz"
    np.savez(tmp, **batches)
    os.replace(tmp, path)
    log(f"materialised {num_batches} batches of {args.batch_size} from {patterns} in "
        f"{time.perf_counter() - start:.0f} s ({tf.__version__})")
    return batches


def _slice(batches, start, stop):
    return {k: v[start:stop] for k, v in batches.items()}


# --- comparisons ---------------------------------------------------------------


def relative_gaps(ours, garden):
    """Per-step |ours - garden| / |garden| of each loss."""
    return {key: (np.abs(np.asarray(ours[key]) - np.asarray(garden[key]))
                  / np.maximum(np.abs(np.asarray(garden[key])), 1e-12)).tolist()
            for key in LOSS_KEYS}


def judge_exact(ours, garden, initial, learning_rate_sum, args):
    """Verdict of one of our variants against Garden's run over the exact part.

    Losses: every step's total, MLM and NSP loss within `args.loss_rtol`.
    Weights: every element within `args.weight_tol * learning_rate_sum`.
    Adam moves an element by about the learning rate per step whatever its
    gradient's size, so the summed rates are the scale of any weight's
    total movement; a relative tolerance per weight would not do, since
    some weights (the attention key biases) get no true gradient and move
    only by rounding noise that Adam normalises to full-size steps.
    """
    from research.benchmarks.parity_stacks import compare_arrays

    gaps = relative_gaps(ours["losses"], garden["losses"])
    weights = compare_arrays(ours["arrays"], garden["arrays"], initial)
    worst_loss = max(max(v) for v in gaps.values())
    worst_weight = max(weights, key=lambda k: weights[k]["max_abs"])
    first_bad = [i + 1 for i in range(len(gaps["loss"]))
                 if max(gaps[k][i] for k in LOSS_KEYS) > args.loss_rtol]
    weight_limit = args.weight_tol * learning_rate_sum
    losses_ok = worst_loss <= args.loss_rtol
    weights_ok = weights[worst_weight]["max_abs"] <= weight_limit
    return {
        "losses_agree": losses_ok, "weights_agree": weights_ok,
        "parity": losses_ok and weights_ok,
        "max_loss_rel_gap": worst_loss,
        "max_loss_rel_gap_by_key": {k: max(v) for k, v in gaps.items()},
        "first_step_over_loss_rtol": first_bad[0] if first_bad else None,
        "worst_weight": worst_weight,
        "max_weight_abs_diff": weights[worst_weight]["max_abs"],
        "weight_abs_limit": weight_limit,
        "gaps": gaps, "weights": weights,
    }


def trailing_mean(values, window):
    """Mean of the last `window` values at each step (fewer at the start)."""
    values = np.asarray(values, np.float64)
    sums = np.cumsum(np.concatenate([[0.0], values]))
    ends = np.arange(1, len(values) + 1)
    starts = np.maximum(0, ends - window)
    return (sums[ends] - sums[starts]) / (ends - starts)


def judge_curves(ours, garden, args):
    """Smoothed-MLM-curve verdict of the dropout-on part (from the first full window on)."""
    a = trailing_mean(ours, args.smoothing)
    b = trailing_mean(garden, args.smoothing)
    gap = np.abs(a - b) / np.maximum(np.abs(b), 1e-12)
    start = min(args.smoothing, len(gap)) - 1
    worst = int(start + np.argmax(gap[start:]))
    return {"parity": bool(gap[start:].max() <= args.curve_rtol),
            "max_rel_gap": float(gap[start:].max()), "step_of_max": worst + 1,
            "final_smoothed": {"ours": float(a[-1]), "garden": float(b[-1])},
            "steps": len(ours)}


# --- parts ------------------------------------------------------------------------


def _write_json(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, path)


def _read_json(path):
    with open(path) as f:
        return json.load(f)


def run_exact(args, batches, controls, log=print):
    """Part 1 and 2: Garden, ours and the controls, dropout off; one npz per finished stack."""
    from research.benchmarks.parity_stacks import build_stacks, our_schedule

    folder = os.path.join(args.output_dir, "exact")
    os.makedirs(folder, exist_ok=True)
    config = stack_config(args, args.exact_steps, dropout=0.0)
    names = ["garden", "ours", *controls]
    done = {n: os.path.join(folder, f"{n}.npz") for n in names}
    if not all(os.path.exists(p) for p in done.values()):
        stacks = build_stacks(config, args.seed, variants=("ours", *controls))
        initial_path = os.path.join(folder, "initial.npz")
        if not os.path.exists(initial_path):
            np.savez(initial_path, **stacks["ours"].arrays())
        for name in names:
            if os.path.exists(done[name]):
                continue
            start = time.perf_counter()
            losses = stacks[name].train(batches)
            seconds = time.perf_counter() - start
            log(f"exact {name}: {args.exact_steps} steps in {seconds:.0f} s, "
                f"loss {losses['loss'][0]:.5f} -> {losses['loss'][-1]:.5f}")
            tmp = done[name] + ".tmp.npz"
            np.savez(tmp, **{f"arrays/{k}": v for k, v in stacks[name].arrays().items()},
                     **{f"losses/{k}": np.asarray(v) for k, v in losses.items()},
                     seconds=seconds)
            os.replace(tmp, done[name])
    runs = {}
    for name in names:
        with np.load(done[name]) as saved:
            runs[name] = {
                "losses": {k.split("/", 1)[1]: saved[k].tolist()
                           for k in saved.files if k.startswith("losses/")},
                "arrays": {k.split("/", 1)[1]: saved[k]
                           for k in saved.files if k.startswith("arrays/")},
                "seconds": float(saved["seconds"]),
            }
    with np.load(os.path.join(folder, "initial.npz")) as saved:
        initial = {k: saved[k] for k in saved.files}
    schedule = our_schedule(config)
    learning_rate_sum = float(sum(schedule(step) for step in range(args.exact_steps)))
    verdicts = {name: judge_exact(runs[name], runs["garden"], initial, learning_rate_sum, args)
                for name in ["ours", *controls]}
    return config, runs, verdicts


def run_dropout(args, batches, log=print, on_chunk=None):
    """Part 3: both stacks with dropout, in checkpointed chunks.

    Args:
      args: the parsed options.
      batches: the materialised batches, `{feature: [steps, B, ...]}`.
      log: called with progress lines.
      on_chunk: optional; called with the state after every saved chunk.

    Returns:
      The state: `step` done, per-stack per-step `losses`, training `seconds`.
    """
    import tensorflow as tf

    from research.benchmarks.parity_stacks import build_stacks

    folder = os.path.join(args.output_dir, "dropout")
    os.makedirs(folder, exist_ok=True)
    state_path = os.path.join(folder, "state.json")
    total = args.dropout_steps
    state = (_read_json(state_path) if os.path.exists(state_path)
             else {"step": 0, "losses": {"ours": {}, "garden": {}}, "seconds": 0.0})
    if state["step"] >= total:
        return state
    config = stack_config(args, total, dropout=args.dropout)
    stacks = build_stacks(config, args.seed, variants=("ours",))
    tf.random.set_seed(args.seed)  # Garden's (stateful) dropout; ours has its own seeds.
    if state["step"]:
        for name, stack in stacks.items():
            prefix = os.path.join(folder, name, f"ckpt-{state['step']}")
            stack.checkpoint.read(prefix).assert_existing_objects_matched()
        log(f"dropout: resumed at step {state['step']}")
    while state["step"] < total:
        step = state["step"]
        stop = min(total, step + args.checkpoint_every)
        chunk = _slice(batches, step, stop)
        start = time.perf_counter()
        for name, stack in stacks.items():
            losses = stack.train(chunk)
            for key, values in losses.items():
                state["losses"][name].setdefault(key, []).extend(values)
            stack.checkpoint.write(os.path.join(folder, name, f"ckpt-{stop}"))
        state["step"] = stop
        state["seconds"] += time.perf_counter() - start
        _write_json(state_path, state)
        _remove_old_checkpoints(folder, list(stacks), keep=stop)
        if on_chunk is not None:
            on_chunk(state)
        mlm = {n: np.mean(state["losses"][n]["mlm_loss"][step:stop]) for n in stacks}
        log(f"dropout: step {stop}/{total}, mean MLM loss of the chunk ours "
            f"{mlm['ours']:.4f} Garden {mlm['garden']:.4f} "
            f"({time.perf_counter() - start:.0f} s)")
    return state


def _remove_old_checkpoints(folder, names, keep):
    for name in names:
        for path in glob.glob(os.path.join(folder, name, "ckpt-*")):
            step = os.path.basename(path).split("-", 1)[1].split(".", 1)[0]
            if step.isdigit() and int(step) != keep:
                os.remove(path)


# --- entry point ------------------------------------------------------------------


def run(args, log=print):
    """All parts; returns the results dict (also written to `results.json`)."""
    from research.benchmarks import parity_report
    from research.benchmarks.parity_stacks import VARIANTS

    os.makedirs(args.output_dir, exist_ok=True)
    controls = [c for c in args.controls.split(",") if c]
    unknown = [c for c in controls if c not in VARIANTS or c == "ours"]
    if unknown:
        raise ValueError(f"--controls: unknown {unknown}; expected some of "
                         f"{[v for v in VARIANTS if v != 'ours']}")
    batches = materialise_batches(os.path.join(args.output_dir, "batches.npz"), args,
                                  max(args.exact_steps, args.dropout_steps), log)
    exact_config, runs, verdicts = run_exact(args, _slice(batches, 0, args.exact_steps),
                                             controls, log)
    results = {
        "settings": {k: v for k, v in vars(args).items()},
        "encoder": exact_config.encoder.to_dict(),
        "exact": {"steps": args.exact_steps, "warmup_steps": exact_config.warmup_steps,
                  "seconds": {n: r["seconds"] for n, r in runs.items()},
                  "losses": {n: r["losses"] for n, r in runs.items()},
                  "verdicts": verdicts},
        "schedules": parity_report.schedule_table(exact_config),
    }

    def publish(state=None):
        # Written after the exact part and after every dropout chunk, so a
        # long run shows its results so far; `complete` says whether it ended.
        if state is not None:
            results["dropout"] = {
                "steps_done": state["step"], "seconds": state["seconds"],
                "losses": state["losses"],
                "verdict": judge_curves(state["losses"]["ours"]["mlm_loss"],
                                        state["losses"]["garden"]["mlm_loss"], args),
            }
        results["complete"] = (not args.dropout_steps
                               or results.get("dropout", {}).get("steps_done", 0)
                               >= args.dropout_steps)
        results["passed"] = passed(results, controls)
        _write_json(os.path.join(args.output_dir, "results.json"), results)
        parity_report.write_report(results, args.output_dir)

    publish()
    if args.dropout_steps:
        publish(run_dropout(args, batches, log, on_chunk=publish))
    return results


def passed(results, controls):
    """`{"parity": bool, "controls_diverge": bool}`; parity needs every part finished."""
    verdicts = results["exact"]["verdicts"]
    parity = verdicts["ours"]["parity"] and results["complete"]
    if "dropout" in results:
        parity = parity and results["dropout"]["verdict"]["parity"]
    return {"parity": bool(parity),
            "controls_diverge": all(not verdicts[c]["parity"] for c in controls)}


def main(argv=None):
    """Command-line entry point; returns the exit code."""
    args = build_parser().parse_args(argv)
    results = run(args, log=lambda m: print(m, flush=True))
    print(open(os.path.join(args.output_dir, "report.md")).read())
    ok = results["passed"]
    return 0 if ok["parity"] and ok["controls_diverge"] else 1


if __name__ == "__main__":
    sys.exit(main())

