"""Writes statically masked BERT pretraining TFRecord shards from a text corpus.

    python -m bert_tf.create_pretraining_data --input_file 'corpus/*.txt' \
        --output_dir data/pretrain --vocab_file vocab.txt [--do_lower_case=true] \
        [--max_seq_length 128] [--max_predictions_per_seq 20] [--masked_lm_prob 0.15] \
        [--short_seq_prob 0.1] [--dupe_factor 10] [--random_seed 12345] [--num_shards 8] \
        [--whole_word_mask] [--no_nsp]

The input is BERT's corpus format (one sentence per line, a blank line between
documents; comma-separated globs as in google-research/bert). The output is
google-research/bert's TFRecord format (`bert_tf.data.records`), readable by
its `run_pretraining.py` as well as by `records.read_pretraining_records`.

Like the original tool, the corpus is turned into instances `dupe_factor`
times, each time with different pairs and masks (pass d of the dynamic
pipeline `bert_tf.data.pretraining` with epoch = d). Unlike it, the corpus is
streamed: memory is bounded by the document window and the shuffle buffer,
never by the corpus, and tokenization, pairing and masking run in parallel
tf.data maps. Consequences: instances are shuffled within a buffer
(`--shuffle_buffer_size`) rather than globally, shards hold the passes in
order, and NotNext partners come from the same window of
`--documents_per_window` documents. Examples go round-robin to the shards.
A summary is printed at the end.
"""

import argparse
import sys
import time


def _bool(value):
    lowered = value.strip().lower()
    if lowered in ("1", "true", "yes", "y"):
        return True
    if lowered in ("0", "false", "no", "n"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {value!r}")


def _parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m bert_tf.create_pretraining_data",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--input_file", required=True,
                        help="corpus files: comma-separated glob patterns")
    parser.add_argument("--output_dir", required=True, help="folder receiving the shards")
    parser.add_argument("--vocab_file", required=True, help="BERT vocab.txt")
    parser.add_argument("--do_lower_case", type=_bool, nargs="?", const=True, default=None,
                        help="lower-case the text (default: guessed from the vocab)")
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--max_predictions_per_seq", type=int, default=20)
    parser.add_argument("--masked_lm_prob", type=float, default=0.15)
    parser.add_argument("--mask_fraction", type=float, default=0.8,
                        help="of the selected tokens, the fraction replaced by [MASK]")
    parser.add_argument("--keep_fraction", type=float, default=0.1,
                        help="... left unchanged (the three fractions sum to 1)")
    parser.add_argument("--random_fraction", type=float, default=0.1,
                        help="... replaced by a random token")
    parser.add_argument("--short_seq_prob", type=float, default=0.1)
    parser.add_argument("--dupe_factor", type=int, default=10,
                        help="passes over the corpus, each with different masks")
    parser.add_argument("--random_seed", type=int, default=12345)
    parser.add_argument("--num_shards", type=int, default=1, help="output files")
    parser.add_argument("--output_prefix", default="pretraining",
                        help="shard file names: PREFIX-00000-of-00008.tfrecord")
    parser.add_argument("--whole_word_mask", action="store_true",
                        help="mask whole words (all their WordPiece pieces)")
    parser.add_argument("--no_nsp", action="store_true",
                        help="single segments without next_sentence_labels")
    parser.add_argument("--documents_per_window", type=int, default=64,
                        help="documents NotNext partners are drawn from")
    parser.add_argument("--shuffle_buffer_size", type=int, default=10000,
                        help="instances shuffled together (memory bound)")
    parser.add_argument("--log_every", type=int, default=10000,
                        help="progress on stderr every N instances (0: never)")
    return parser.parse_args(argv)


def _check_args(args):
    for name in ("max_seq_length", "max_predictions_per_seq", "dupe_factor", "num_shards",
                 "documents_per_window"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name} must be >= 1, got {getattr(args, name)}")
    if not 0.0 < args.masked_lm_prob < 1.0:
        raise ValueError(f"--masked_lm_prob must be in (0, 1), got {args.masked_lm_prob}")


def create_shards(args):
    """Runs the pipeline and writes the shards; returns the summary dict."""
    # Imported here so `--help` and argument errors do not wait for TensorFlow.
    from bert_tf import storage
    from bert_tf.data import pretraining, records
    from bert_tf.text import tokenizer_contract
    from bert_tf.text.masking import MaskingFractions
    from bert_tf.text.tokenizer import BertTokenizer

    fractions = MaskingFractions(mask=args.mask_fraction, keep=args.keep_fraction,
                                 random=args.random_fraction)
    fractions.check(("--mask_fraction", "--keep_fraction", "--random_fraction"))
    patterns = [p.strip() for p in args.input_file.split(",") if p.strip()]
    lower_case = args.do_lower_case
    if lower_case is None:
        lower_case = tokenizer_contract.guess_lower_case(args.vocab_file)
    tokenizer = BertTokenizer(args.vocab_file, lower_case=lower_case)
    options = pretraining.PretrainingOptions(
        max_seq_length=args.max_seq_length,
        max_predictions_per_seq=args.max_predictions_per_seq,
        masked_lm_prob=args.masked_lm_prob, short_seq_prob=args.short_seq_prob,
        nsp=not args.no_nsp, whole_word_masking=args.whole_word_mask,
        masking_fractions=fractions, seed=args.random_seed,
        documents_per_window=args.documents_per_window,
        shuffle_buffer_size=args.shuffle_buffer_size)
    dataset = pretraining.pretraining_dataset(
        patterns, tokenizer, args.vocab_file, batch_size=None, options=options, epoch=0,
        num_epochs=args.dupe_factor)
    # Batches cross into Python cheaper than single examples.
    dataset = dataset.batch(256)

    storage.makedirs(args.output_dir, exist_ok=True)
    outputs = [storage.join(args.output_dir,
                            f"{args.output_prefix}-{i:05d}-of-{args.num_shards:05d}.tfrecord")
               for i in range(args.num_shards)]
    start = time.time()
    totals = {"instances": 0, "tokens": 0, "predictions": 0, "not_next": 0}
    with records.PretrainingRecordWriter(outputs) as writer:
        for batch in dataset.as_numpy_iterator():
            size = len(batch["input_ids"])
            for i in range(size):
                writer.write({name: values[i] for name, values in batch.items()})
            totals["instances"] += size
            totals["tokens"] += int(batch["input_mask"].sum())
            totals["predictions"] += int(batch["masked_lm_weights"].sum())
            if "next_sentence_labels" in batch:
                totals["not_next"] += int(batch["next_sentence_labels"].sum())
            previous = totals["instances"] - size
            crossed = previous // max(args.log_every, 1) != totals["instances"] // max(
                args.log_every, 1)
            if args.log_every and crossed:
                print(f"{totals['instances']} instances, {time.time() - start:.0f} s",
                      file=sys.stderr, flush=True)
    totals["seconds"] = time.time() - start
    totals["shards"] = list(zip(outputs, writer.counts))
    totals["lower_case"] = lower_case
    return totals


def _print_summary(args, totals):
    n = max(totals["instances"], 1)
    print(f"input: {args.input_file}")
    print(f"lower_case={totals['lower_case']} max_seq_length={args.max_seq_length} "
          f"max_predictions_per_seq={args.max_predictions_per_seq} "
          f"masked_lm_prob={args.masked_lm_prob} dupe_factor={args.dupe_factor} "
          f"whole_word_mask={args.whole_word_mask} nsp={not args.no_nsp} "
          f"random_seed={args.random_seed}")
    print(f"instances: {totals['instances']}")
    print(f"tokens: {totals['tokens']} (mean {totals['tokens'] / n:.1f} per instance)")
    print(f"masked predictions: {totals['predictions']} "
          f"({totals['predictions'] / max(totals['tokens'], 1):.2%} of the tokens)")
    if not args.no_nsp:
        print(f"NotNext: {totals['not_next'] / n:.2%}")
    rate = totals["instances"] / max(totals["seconds"], 1e-9)
    print(f"time: {totals['seconds']:.1f} s ({rate:.0f} instances/s)")
    for path, count in totals["shards"]:
        print(f"wrote {count} instances to {path}")


def main(argv=None):
    """Command-line entry point; returns the process exit code."""
    args = _parse_args(argv)
    try:
        _check_args(args)
        totals = create_shards(args)
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if totals["instances"] == 0:
        print("error: the corpus produced no instance (is it empty?)", file=sys.stderr)
        return 1
    _print_summary(args, totals)
    return 0


if __name__ == "__main__":
    sys.exit(main())
