"""Convert BERT checkpoints between formats.

    python -m bert_tf.convert --from hf --input path/to/hf_model --to bert_tf --output out/
    python -m bert_tf.convert --from google --input uncased_L-12_H-768_A-12 --to hf --output out/
    python -m bert_tf.convert --input bert_tf_dir/ --to kerashub --output kerashub_preset/
    python -m bert_tf.convert --input runs/sst2/ --model task --to kerashub --output sst2_preset/

Prints a report of what was loaded. A missing variable or a shape mismatch
is an error naming the variable with its expected and found shapes.
"""

import argparse
import json
import sys

from bert_tf import console, path_args, storage


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m bert_tf.convert", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--from", dest="source_format", metavar="FORMAT",
                        help="input format, detected when omitted: bert_tf, keras, hf, google, "
                        "garden, kerashub or another registered format")
    parser.add_argument("--input", required=True, help="checkpoint directory, file or prefix")
    parser.add_argument("--to", dest="target_format", metavar="FORMAT", default="bert_tf",
                        help="output format (default bert_tf): bert_tf, hf, google, garden, "
                        "kerashub or another registered writable format")
    parser.add_argument("--output", required=True, help="output directory")
    parser.add_argument("--model", choices=("encoder", "pretrainer", "task"), default="encoder",
                        help="convert the encoder only, with its MLM/NSP heads, or a fine-tuned "
                        "model with its head (task: from a bert_tf directory, run or .keras "
                        "file, to bert_tf, or a classifier to kerashub)")
    parser.add_argument("--vocab_file", help="vocab to record (and check against the input)")
    casing = parser.add_mutually_exclusive_group()
    casing.add_argument("--lower_case", dest="lower_case", action="store_true", default=None)
    casing.add_argument("--cased", dest="lower_case", action="store_false")
    parser.add_argument("--hidden_act", help="override the activation, e.g. gelu or gelu_tanh "
                        "(Model Garden checkpoints do not record it)")
    console.add_verbose_flag(parser)
    args = parser.parse_args(argv)
    # Before a scheme path imports TensorFlow: its start-up lines stay hidden.
    console.setup(args.verbose)
    problem = (path_args.scheme_problem(("--output", args.output),
                                         ("--vocab_file", args.vocab_file))
               or path_args.input_path_problem(args.input, "--input", path_args.CHECKPOINT))
    if problem:
        parser.exit(path_args.USAGE_ERROR, f"error: {problem}\n")
    # Checked after parsing, not with `choices=`: the registry imports TensorFlow
    # (seconds), which `--help` must not pay.
    from bert_tf.checkpoints import formats

    if args.source_format is not None and args.source_format not in formats.FORMATS:
        parser.error(f"argument --from: invalid choice: {args.source_format!r} "
                     f"(choose from {', '.join(formats.FORMATS)})")
    if args.target_format not in formats.writable_formats():
        parser.error(f"argument --to: invalid choice: {args.target_format!r} "
                     f"(choose from {', '.join(formats.writable_formats())})")
    return args


def main(argv=None):
    args = parse_args(argv)
    from bert_tf.checkpoints import loading
    from bert_tf.optional_imports import MissingDependencyError

    try:
        result = loading.load(args.input, args.model, args.source_format, args.hidden_act,
                              args.vocab_file, args.lower_case)
    except (FileNotFoundError, ValueError, MissingDependencyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    model = result.model
    encoder = getattr(model, "encoder", model)
    vocab = args.vocab_file or result.vocab_file
    lower_case = args.lower_case
    if lower_case is None and result.tokenizer_contract:
        lower_case = result.tokenizer_contract["lower_case"]
    try:
        # Formats without a tokenizer contract of their own ignore it.
        loading.save(model, args.output, args.target_format, vocab, lower_case,
                     result.tokenizer_contract, result.task_record)
    except MissingDependencyError as e:  # writing Model Garden checkpoints or KerasHub presets
        print(f"error: {e}", file=sys.stderr)
        return 1
    except ValueError as e:  # a model the target format cannot hold, e.g. KerasHub's GELU
        print(f"error: {e}", file=sys.stderr)
        return 2
    report = {
        "input": storage.abspath(args.input),
        "input_format": result.format,
        "output": storage.abspath(args.output),
        "output_format": args.target_format,
        "model": type(model).__name__,
        "parameters": int(model.count_params()),
        "variables_loaded": len(result.loaded),
        "variables_initialised": result.initialised,
        "encoder_config": encoder.encoder_config.to_dict(),
        "tokenizer_contract": result.tokenizer_contract,
        "task": result.task_record.to_dict() if result.task_record else None,
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
