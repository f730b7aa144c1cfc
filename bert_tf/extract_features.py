"""`python -m bert_tf.extract_features`: per-token encoder features for a text file.

    python -m bert_tf.extract_features --init_checkpoint CKPT --input_file lines.txt \\
        --output_file features.jsonl [--layers=-1,-2,-3,-4] [--combine concat] \\
        [--granularity word] [--max_seq_length 128] [--batch_size 32]

The feature-based approach of the BERT paper (section 5.3): one line of the
input is one text, or a pair written `text_a ||| text_b`. CKPT is any
checkpoint `bert_tf` reads (ours or a training run's model_dir, Google TF1,
Hugging Face, Model Garden); its vocab.txt is used unless --vocab_file says
otherwise. Output by extension:
  .jsonl  one object per line: {"line_index", "tokens": [{"token", "segment",
          "start_char", "end_char", "features": [...]}]}
  .npz    flat arrays over all rows: line_index, segment, token, start_char,
          end_char, features [rows, dim]
"""

import argparse
import json
import sys

from bert_tf import console, path_args, storage


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m bert_tf.extract_features",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--init_checkpoint", required=True)
    parser.add_argument("--input_file", required=True, help="UTF-8 text, one input per line")
    parser.add_argument("--output_file", required=True, help="*.jsonl or *.npz")
    parser.add_argument("--vocab_file", default=None)
    parser.add_argument("--lower_case", choices=("true", "false"), default=None,
                        help="default: as the checkpoint's tokenizer contract says")
    parser.add_argument("--layers", default="-1,-2,-3,-4")
    parser.add_argument("--combine", choices=("concat", "sum", "mean"), default="concat")
    parser.add_argument("--granularity", choices=("word", "wordpiece"), default="word")
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--batch_size", type=int, default=32)
    console.add_verbose_flag(parser)
    return parser.parse_args(argv)


def read_lines(path):
    """The input lines (without newlines); a clear error for bad UTF-8 or no text."""
    with storage.open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise ValueError(f"{path}:{line}: invalid UTF-8 ({e.reason} at byte {e.start})") from None
    lines = text.splitlines()
    if not any(line.strip() for line in lines):
        raise ValueError(f"{path}: no text to extract features from")
    return lines


def write_features(features, path):
    """Writes `TokenFeatures` as JSON lines or NPZ (chosen by extension), atomically."""
    import numpy as np

    if path.endswith(".npz"):
        with storage.atomic_write(path, "wb") as f:
            np.savez(f, line_index=features.line_index, segment=features.segment,
                     token=np.array(features.token, dtype=str),
                     start_char=features.start_char, end_char=features.end_char,
                     features=features.features)
    else:
        by_line = {}
        for i, line_index in enumerate(features.line_index.tolist()):
            by_line.setdefault(line_index, []).append({
                "token": features.token[i], "segment": int(features.segment[i]),
                "start_char": int(features.start_char[i]),
                "end_char": int(features.end_char[i]),
                "features": [round(float(v), 6) for v in features.features[i]]})
        with storage.atomic_write(path, encoding="utf-8") as f:
            for line_index in sorted(by_line):
                f.write(json.dumps({"line_index": line_index, "tokens": by_line[line_index]},
                                   ensure_ascii=False) + "\n")


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    problem = path_args.input_path_problem(args.init_checkpoint, "--init_checkpoint",
                                           path_args.CHECKPOINT)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return path_args.USAGE_ERROR
    console.setup(args.verbose)
    if not args.output_file.endswith((".jsonl", ".npz")):
        print(f"error: --output_file {args.output_file} must end in .jsonl or .npz",
              file=sys.stderr)
        return 2
    from bert_tf.checkpoints import loading
    from bert_tf.optional_imports import MissingDependencyError
    from bert_tf.tasks.feature_extraction import FeatureExtractor, parse_layers
    from bert_tf.text import tokenizer_contract
    from bert_tf.text.tokenizer import BertTokenizer

    try:
        lines = read_lines(args.input_file)
        info = loading.describe(args.init_checkpoint)
        vocab = args.vocab_file or info.vocab_file
        if not vocab:
            raise ValueError(f"{args.init_checkpoint} ships no vocab.txt; give --vocab_file")
        if args.lower_case is not None:
            lower_case = args.lower_case == "true"
        elif info.tokenizer_contract:
            lower_case = info.tokenizer_contract["lower_case"]
        else:
            lower_case = tokenizer_contract.guess_lower_case(vocab)
        encoder = loading.load_encoder(args.init_checkpoint, vocab_file=vocab,
                                       lower_case=lower_case)
        layers = parse_layers(args.layers, encoder.encoder_config.num_layers)
        if args.max_seq_length > encoder.encoder_config.max_position_embeddings:
            raise ValueError(f"--max_seq_length {args.max_seq_length} exceeds the encoder's "
                             f"{encoder.encoder_config.max_position_embeddings} positions")
        extractor = FeatureExtractor(encoder, BertTokenizer(vocab, lower_case=lower_case),
                                     layers, args.combine, args.granularity,
                                     args.max_seq_length)
        features = extractor.extract(lines, args.batch_size)
    except (ValueError, FileNotFoundError, MissingDependencyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    write_features(features, args.output_file)
    print(f"{len(features.token)} tokens from {len(lines)} lines, "
          f"{features.features.shape[-1]} features each -> {args.output_file}")
    if extractor.truncated_lines:
        print(f"{extractor.truncated_lines} lines were longer than --max_seq_length "
              f"{args.max_seq_length}; their extra tokens have no features")
    return 0


if __name__ == "__main__":
    sys.exit(main())
