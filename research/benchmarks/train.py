"""Pretraining step throughput: our `BertPretrainer` vs Model Garden's `BertPretrainerV2`.

    python -m research.bench train [--configs mini_fp32,mini_bf16,base_fp32,base_bf16]
        [--repeats 5] [--steps 4] [--warmup 2] [--xent fast|tf] [--no_garden]

Synthetic batches isolate the step; the same comparison on the real corpus,
counting non-padding tokens, with our rows packed and Model Garden's padded, is
`python -m research.bench packing --parts pretrain_128,pretrain_512`.

Times one BERT pretraining train step (masked LM + next-sentence prediction,
forward with dropout active, backward, global-norm clipping at 1.0, AdamW
with weight decay 0.01 excluding LayerNorm and bias weights) of our model
and of Model Garden's, built with the same shapes, on the same synthetic
batch: random token ids, some padding, up to 20 masked positions per
sequence with weights, random NSP labels. Repeats of ours and of Model
Garden alternate (and swap order every round), so machine noise hits both;
the table gives the median sequences/s of each and the median over rounds
of the ratio ours / Model Garden within a round.

The fraction of matmul peak is the step's matmul FLOPs (3x the forward
matmuls: projections, FFN, attention scores and context, pooler, MLM
transform and vocabulary projection) per second over this machine's
measured peak, from a large `tf.matmul` in the same dtype in the same run.

Model Garden's `BertEncoderV2` uses the tanh GELU (its default); ours uses
its default exact (erf) GELU, the more expensive of the two. Its NSP head is
Model Garden's own (`ClassificationHead` with a tanh inner layer on the
first token, as in its pretraining task); its encoder also computes a pooled
output the loss does not use. Both are a negligible part of the step.
Each model gets its own framework's AdamW (Keras 3 for ours, tf_keras for
Model Garden) with the same hyperparameters. Our step is the trainer's own
(`bert_tf.training.train_step.TrainStep` with the pretraining task, whose MLM
loss uses `fast_ops.sparse_softmax_cross_entropy`); Model Garden's loss uses
the same cross-entropy by default, or TensorFlow's fused kernel with
`--xent tf` (slower; then only Model Garden pays it).
"""

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

# name -> (preset, batch size, dtype policy)
CONFIGS = {
    "mini_fp32": ("bert_mini", 32, "float32"),
    "mini_bf16": ("bert_mini", 32, "mixed_bfloat16"),
    "base_fp32": ("bert_base", 8, "float32"),
    "base_bf16": ("bert_base", 8, "mixed_bfloat16"),
}
SEQ_LENGTH = 128
MAX_PREDICTIONS = 20
VOCAB_SIZE = 30522
LEARNING_RATE = 1e-4
WEIGHT_DECAY = 0.01
ADAM_EPSILON = 1e-6
CLIP_NORM = 1.0


def build_parser():
    """Command-line options of the benchmark."""
    parser = argparse.ArgumentParser(
        prog="python -m research.bench train", description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", default=",".join(CONFIGS),
                        help=f"comma-separated subset of {', '.join(CONFIGS)}")
    parser.add_argument("--repeats", type=int, default=5,
                        help="timed rounds per model, ours and Model Garden alternating")
    parser.add_argument("--steps", type=int, default=4, help="train steps per timed round")
    parser.add_argument("--warmup", type=int, default=2,
                        help="untimed steps per model after tracing")
    parser.add_argument("--seq_length", type=int, default=SEQ_LENGTH)
    parser.add_argument("--max_predictions", type=int, default=MAX_PREDICTIONS)
    parser.add_argument("--no_garden", action="store_true",
                        help="time only our model (no ratio)")
    parser.add_argument("--xent", choices=("fast", "tf"), default="fast",
                        help="MLM cross-entropy of both models: fast_ops' (default) or "
                             "TensorFlow's fused sparse_softmax_cross_entropy_with_logits")
    parser.add_argument("--peak_size", type=int, default=2048,
                        help="side of the square matmul that measures the peak")
    return parser


# --- Inputs ----------------------------------------------------------------


def synthetic_batch(batch_size, seq_length, max_predictions, vocab_size, seed=0):
    """A realistic pretraining batch as numpy arrays.

    Lengths are mostly full (as with BERT's packing) with some shorter rows;
    15 % of the real tokens, at most `max_predictions`, are masked, and the
    unused prediction slots have weight 0.
    """
    rng = np.random.default_rng(seed)
    first_word_id = min(1000, vocab_size // 2)  # BERT's ids below 1000: specials, [unusedN]
    lengths = np.where(rng.random(batch_size) < 0.75, seq_length,
                       rng.integers(seq_length // 2, seq_length, batch_size))
    token_ids = rng.integers(first_word_id, vocab_size, (batch_size, seq_length)).astype("int32")
    padding_mask = (np.arange(seq_length)[None, :] < lengths[:, None]).astype("int32")
    segment_ids = np.zeros((batch_size, seq_length), "int32")
    positions = np.zeros((batch_size, max_predictions), "int32")
    weights = np.zeros((batch_size, max_predictions), "float32")
    for row, length in enumerate(lengths):
        segment_ids[row, length // 2:length] = 1
        count = min(max_predictions, max(1, int(round(0.15 * length))))
        chosen = np.sort(rng.choice(np.arange(1, length - 1), count, replace=False))
        positions[row, :count] = chosen
        weights[row, :count] = 1.0
    token_ids *= padding_mask
    labels = rng.integers(first_word_id, vocab_size, (batch_size, max_predictions)).astype("int32")
    return {
        "token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask,
        "masked_lm_positions": positions, "masked_lm_ids": labels,
        "masked_lm_weights": weights,
        "next_sentence_labels": rng.integers(0, 2, (batch_size,)).astype("int32"),
    }


# --- FLOPs and peak ---------------------------------------------------------


def step_matmul_flops(config, batch_size, seq_length, max_predictions):
    """Matmul FLOPs of one train step: 3x the forward (backward ~ 2x forward)."""
    h, i, s = config.hidden_size, config.intermediate_size, seq_length
    per_token_layer = 2 * 4 * h * h + 2 * 2 * h * i + 2 * 2 * s * h  # QKVO, FFN, QK^T and PV
    encoder = s * config.num_layers * per_token_layer + 2 * h * h  # + pooler
    mlm = max_predictions * (2 * h * h + 2 * h * config.vocab_size)
    return 3 * batch_size * (encoder + mlm)


def matmul_peak(dtype, size, seconds=2.0):
    """GFLOP/s of a large square `tf.matmul` in `dtype` (median of short rounds)."""
    import tensorflow as tf

    a = tf.random.normal([size, size], dtype=tf.float32)
    b = tf.random.normal([size, size], dtype=tf.float32)
    a, b = tf.cast(a, dtype), tf.cast(b, dtype)

    @tf.function
    def run(a, b):
        # Four chained products per call keep the Python overhead out.
        c = tf.matmul(a, b)
        for _ in range(3):
            c = tf.matmul(a, c)
        return tf.reduce_sum(tf.cast(c[:1, :1], tf.float32))

    run(a, b).numpy()
    rates, deadline = [], time.perf_counter() + seconds
    while time.perf_counter() < deadline or len(rates) < 3:
        start = time.perf_counter()
        run(a, b).numpy()
        rates.append(4 * 2 * size ** 3 / (time.perf_counter() - start) / 1e9)
    return statistics.median(rates)


# --- Our model --------------------------------------------------------------


def build_ours(config, policy):
    """Our `BertPretrainer` (MLM + NSP) and an AdamW, for `config` and `policy`."""
    from bert_tf.models.bert_encoder import BertEncoder
    from bert_tf.models.bert_pretrainer import BertPretrainer
    from bert_tf.training.optimizers import OptimizerConfig, build_optimizer

    model = BertPretrainer(BertEncoder.from_encoder_config(config, dtype=policy))
    # The trainer's optimizer: AdamW without decay on LayerNorm and biases.
    optimizer = build_optimizer(OptimizerConfig(
        learning_rate=LEARNING_RATE, weight_decay=WEIGHT_DECAY, epsilon=ADAM_EPSILON,
        warmup_steps=0, decay="constant", clip_norm=CLIP_NORM), train_steps=1)
    optimizer.build(model.trainable_variables)
    return model, optimizer


def our_inputs(batch):
    import tensorflow as tf

    keys = ("token_ids", "segment_ids", "padding_mask", "masked_lm_positions")
    return ({k: tf.constant(batch[k]) for k in keys},
            {k: tf.constant(batch[k]) for k in
             ("masked_lm_ids", "masked_lm_weights", "next_sentence_labels")})


def pretraining_loss(mlm_logits, nsp_logits, labels, xent=None):
    """MLM (weighted mean over masked positions) + NSP (mean) cross-entropy, float32.

    `xent(labels, logits)` is the per-position MLM cross-entropy; by default
    `bert_tf.layers.fast_ops.sparse_softmax_cross_entropy` (the same values as
    TensorFlow's fused op in about half the time on [B * P, V] logits). It is
    used for both models, so the comparison stays like for like.
    """
    import tensorflow as tf

    from bert_tf.layers import fast_ops

    xent = xent or fast_ops.sparse_softmax_cross_entropy

    mlm_xent = xent(labels["masked_lm_ids"], tf.cast(mlm_logits, tf.float32))  # [B, P]
    weights = labels["masked_lm_weights"]
    mlm_loss = tf.math.divide_no_nan(tf.reduce_sum(mlm_xent * weights),
                                     tf.reduce_sum(weights))
    nsp_loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels["next_sentence_labels"], tf.cast(nsp_logits, tf.float32)))
    return mlm_loss + nsp_loss


def our_train_step(model, optimizer):
    """The trainer's own step for our model: `bert_tf.training.train_step.TrainStep`.

    One global step on the default strategy, exactly as `python -m
    bert_tf.train` runs it: forward with dropout, the pretraining task's MLM
    + NSP loss, gradients summed (a no-op on one replica), global norm
    clipped to 1.0, finite check, AdamW. Returns `step(features, labels)`.
    """
    import tensorflow as tf

    from bert_tf.tasks.pretraining import (
        PretrainingExperiment,
        PretrainingModelConfig,
        PretrainingTask,
    )
    from bert_tf.training.loss_scale import LossScale
    from bert_tf.training.train_step import TrainStep

    task = PretrainingTask(PretrainingExperiment(
        model=PretrainingModelConfig(encoder=model.encoder.encoder_config)))
    counter = dict(dtype=tf.int64, trainable=False)
    train_step = TrainStep(
        tf.distribute.get_strategy(), task, model, optimizer, LossScale(enabled=False),
        clip_norm=CLIP_NORM, accumulation_steps=1, jit_compile=False,
        step=tf.Variable(0, **counter), consecutive_nonfinite=tf.Variable(0, **counter))
    one_step = tf.constant(1)
    iterators = {}

    def step(features, labels):
        # One endless iterator per batch; the batch is kept with it so its id
        # cannot be reused by another object.
        key = id(features)
        if key not in iterators:
            batches = tf.data.Dataset.from_tensors((features, labels)).repeat()
            iterators[key] = (features, iter(batches))
        return train_step.train_loop(iterators[key][1], one_step)["loss"]

    return step


# --- Model Garden -------------------------------------------------------------


def build_garden(config, policy):
    """Model Garden's `BertPretrainerV2` with an NSP head, and a tf_keras AdamW."""
    import tf_keras
    from official.nlp.modeling import layers, models, networks

    previous = tf_keras.mixed_precision.global_policy()
    tf_keras.mixed_precision.set_global_policy(policy)
    try:
        initializer = tf_keras.initializers.TruncatedNormal(stddev=config.initializer_range)
        encoder = networks.BertEncoderV2(
            vocab_size=config.vocab_size, hidden_size=config.hidden_size,
            num_layers=config.num_layers, num_attention_heads=config.num_heads,
            max_sequence_length=config.max_position_embeddings,
            type_vocab_size=config.type_vocab_size, inner_dim=config.intermediate_size,
            output_dropout=config.hidden_dropout,
            attention_dropout=config.attention_dropout, initializer=initializer)
        nsp = layers.ClassificationHead(
            inner_dim=config.hidden_size, num_classes=2,
            dropout_rate=config.hidden_dropout, initializer=initializer,
            name="next_sentence")
        model = models.BertPretrainerV2(
            encoder, mlm_activation=tf_keras.activations.gelu,
            mlm_initializer=initializer, classification_heads=[nsp])
        optimizer = tf_keras.optimizers.AdamW(
            learning_rate=LEARNING_RATE, weight_decay=WEIGHT_DECAY, beta_1=0.9,
            beta_2=0.999, epsilon=ADAM_EPSILON)
        optimizer.exclude_from_weight_decay(var_names=["LayerNorm", "layer_norm", "bias"])
        # The MLM head creates its sublayers on the first call, with the
        # global policy of that moment.
        model(garden_inputs(synthetic_batch(2, 8, 2, config.vocab_size))[0])
    finally:
        tf_keras.mixed_precision.set_global_policy(previous)
    return model, optimizer


def garden_inputs(batch):
    import tensorflow as tf

    features = {
        "input_word_ids": tf.constant(batch["token_ids"]),
        "input_type_ids": tf.constant(batch["segment_ids"]),
        "input_mask": tf.constant(batch["padding_mask"]),
        "masked_lm_positions": tf.constant(batch["masked_lm_positions"]),
    }
    return features, {k: tf.constant(batch[k]) for k in
                      ("masked_lm_ids", "masked_lm_weights", "next_sentence_labels")}


def garden_train_step(model, optimizer, xent=None):
    """The same step for Model Garden's model (its NSP logits are `next_sentence`)."""
    import tensorflow as tf

    @tf.function
    def step(features, labels):
        with tf.GradientTape() as tape:
            outputs = model(features, training=True)
            loss = pretraining_loss(outputs["mlm_logits"], outputs["next_sentence"], labels,
                                    xent)
        # The encoder's own pooler gets no gradient (the NSP head pools itself).
        pairs = [(g, v) for g, v in zip(tape.gradient(loss, model.trainable_variables),
                                        model.trainable_variables) if g is not None]
        grads, _ = tf.clip_by_global_norm([g for g, _ in pairs], CLIP_NORM)
        optimizer.apply_gradients(zip(grads, [v for _, v in pairs]))
        return loss

    return step


# --- Timing -----------------------------------------------------------------


def _timed_round(step, features, labels, steps):
    start = time.perf_counter()
    for _ in range(steps):
        loss = step(features, labels)
    loss.numpy()
    return (time.perf_counter() - start) / steps


def measure_config(name, args, log=print):
    """Median seconds/step of ours (and Model Garden) for one entry of CONFIGS."""
    from bert_tf.models.presets import get_preset

    preset, batch_size, policy = CONFIGS[name]
    config = get_preset(preset, vocab_size=VOCAB_SIZE)
    batch = synthetic_batch(batch_size, args.seq_length, args.max_predictions,
                            config.vocab_size)
    xent = None
    if args.xent == "tf":
        import tensorflow as tf

        xent = tf.nn.sparse_softmax_cross_entropy_with_logits
    runners = {}
    model, optimizer = build_ours(config, policy)
    runners["ours"] = (our_train_step(model, optimizer), *our_inputs(batch))
    if not args.no_garden:
        model, optimizer = build_garden(config, policy)
        runners["garden"] = (garden_train_step(model, optimizer, xent), *garden_inputs(batch))
    for key, (step, features, labels) in runners.items():
        start = time.perf_counter()
        loss = float(step(features, labels))
        log(f"  {name} {key}: first step (trace) {time.perf_counter() - start:.1f} s, "
            f"loss {loss:.3f}")
        for _ in range(args.warmup):
            step(features, labels)
    times = {key: [] for key in runners}
    order = list(runners)
    for _ in range(args.repeats):
        for key in order:
            step, features, labels = runners[key]
            times[key].append(_timed_round(step, features, labels, args.steps))
        order.reverse()  # Neither model always runs first in a round.
    ratios = ([g / o for o, g in zip(times["ours"], times["garden"])]
              if "garden" in times else [])
    return {
        "name": name, "preset": preset, "batch_size": batch_size, "policy": policy,
        "flops": step_matmul_flops(config, batch_size, args.seq_length,
                                   args.max_predictions),
        "seconds": {key: statistics.median(t) for key, t in times.items()},
        "all_seconds": times,
        # Per-round ratios are robust to load that changes between rounds.
        "ratio": statistics.median(ratios) if ratios else None,
    }


def format_table(results, peaks):
    """Markdown table: seq/s of ours and Model Garden, ratio, fraction of matmul peak."""
    lines = [
        "| config | batch | ours seq/s | Garden seq/s | ours / Garden "
        "| ours % of peak | Garden % of peak |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        peak = peaks["bf16" if "bfloat16" in r["policy"] else "fp32"]
        cells = [f"{r['preset']} {r['policy']}", str(r["batch_size"])]
        rates = {k: r["batch_size"] / s for k, s in r["seconds"].items()}
        fractions = {k: r["flops"] / s / 1e9 / peak for k, s in r["seconds"].items()}
        cells.append(f"{rates['ours']:.1f}")
        if "garden" in rates:
            cells += [f"{rates['garden']:.1f}", f"{r['ratio']:.2f}x"]
        else:
            cells += ["-", "-"]
        cells.append(f"{100 * fractions['ours']:.0f} %")
        cells.append(f"{100 * fractions['garden']:.0f} %" if "garden" in fractions else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def main(argv=None):
    """Command-line entry point; returns the exit code."""
    args = build_parser().parse_args(argv)
    names = [n.strip() for n in args.configs.split(",") if n.strip()]
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        print(f"error: unknown config(s) {unknown}; expected {list(CONFIGS)}", file=sys.stderr)
        return 2
    import tensorflow as tf

    print(f"TensorFlow {tf.__version__}, {os.cpu_count()} CPUs, seq {args.seq_length}, "
          f"{args.max_predictions} predictions, {args.repeats} rounds x {args.steps} steps "
          "per model, alternating", flush=True)
    peaks = {"fp32": matmul_peak(tf.float32, args.peak_size),
             "bf16": matmul_peak(tf.bfloat16, args.peak_size)}
    results = []
    for name in names:
        results.append(measure_config(name, args, log=lambda m: print(m, flush=True)))
    # Measured again at the end; the table uses the better of the two.
    peaks = {"fp32": max(peaks["fp32"], matmul_peak(tf.float32, args.peak_size)),
             "bf16": max(peaks["bf16"], matmul_peak(tf.bfloat16, args.peak_size))}
    print(f"matmul peak ({args.peak_size}^2): fp32 {peaks['fp32']:.0f} GFLOP/s, "
          f"bf16 {peaks['bf16']:.0f} GFLOP/s")
    for r in results:
        per_round = {k: " ".join(f"{r['batch_size'] / s:.1f}" for s in t)
                     for k, t in r["all_seconds"].items()}
        print(f"  {r['name']}: {r['flops'] / r['batch_size'] / 1e9:.2f} GFLOP/seq; seq/s per "
              f"round: " + "; ".join(f"{k} {v}" for k, v in per_round.items()))
    print("\n".join(format_table(results, peaks)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
