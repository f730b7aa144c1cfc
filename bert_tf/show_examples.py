"""Print a few pretraining examples decoded back to text.

    python -m bert_tf.show_examples --input 'corpus/*.txt' --vocab_file vocab.txt
    python -m bert_tf.show_examples --input 'shards/*.tfrecord' --vocab_file vocab.txt

Text input goes through the dynamic pipeline (pairs + masking, as training
sees it); `.tfrecord` input is read as BERT pretraining records. For each
example it prints the packed tokens with masked positions shown as
`[MASK]`/replacement and the original token, the segments and the NSP label.
"""

import argparse
import sys


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m bert_tf.show_examples", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input", required=True, nargs="+",
                        help="corpus text files or TFRecords (globs)")
    parser.add_argument("--vocab_file", required=True)
    parser.add_argument("--cased", action="store_true", help="the vocab is cased")
    parser.add_argument("--num_examples", type=int, default=3)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--max_predictions_per_seq", type=int, default=20)
    parser.add_argument("--whole_word_masking", action="store_true")
    parser.add_argument("--no_nsp", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epoch", type=int, default=0)
    return parser.parse_args(argv)


def describe_example(example, tokens):
    """Human-readable lines for one example (numpy feature dict)."""
    length = int(example["input_mask"].sum())
    ids = example["input_ids"][:length]
    shown = [tokens[i] for i in ids]
    originals = {}
    for position, original, weight in zip(example["masked_lm_positions"],
                                          example["masked_lm_ids"],
                                          example["masked_lm_weights"]):
        if weight > 0:
            originals[int(position)] = tokens[int(original)]
    for position, original in originals.items():
        shown[position] = f"{shown[position]}<{original}>"
    lines = ["tokens: " + " ".join(shown)]
    segments = example["segment_ids"][:length]
    lines.append(f"segment A: {int((segments == 0).sum())} tokens, "
                 f"segment B: {int((segments == 1).sum())} tokens")
    if "next_sentence_labels" in example:
        label = int(example["next_sentence_labels"])
        lines.append(f"next sentence: {'IsNext' if label == 0 else 'NotNext'} ({label})")
    lines.append(f"masked: {len(originals)} of {length} tokens "
                 "(shown as current<original>)")
    return lines


def main(argv=None):
    args = parse_args(argv)
    from bert_tf.data import pretraining, records
    from bert_tf.text.tokenizer import BertTokenizer

    tokenizer = BertTokenizer(args.vocab_file, lower_case=not args.cased)
    tokens = tokenizer.vocab
    try:
        if all(pattern.endswith(".tfrecord") for pattern in args.input):
            dataset = records.read_pretraining_records(args.input)
        else:
            options = pretraining.PretrainingOptions(
                max_seq_length=args.max_seq_length,
                max_predictions_per_seq=args.max_predictions_per_seq, nsp=not args.no_nsp,
                whole_word_masking=args.whole_word_masking, seed=args.seed)
            dataset = pretraining.pretraining_dataset(
                args.input, tokenizer, batch_size=None, options=options, epoch=args.epoch)
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for index, example in enumerate(dataset.take(args.num_examples).as_numpy_iterator()):
        print(f"--- example {index}")
        print("\n".join(describe_example(example, tokens)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
