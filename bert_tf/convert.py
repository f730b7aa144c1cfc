"""Convert BERT checkpoints between formats.

    python -m bert_tf.convert --from hf --input path/to/hf_model --to bert_tf --output out/
    python -m bert_tf.convert --from google --input uncased_L-12_H-768_A-12 --to hf --output out/

Prints a report of what was loaded. A missing variable or a shape mismatch
is an error naming the variable with its expected and found shapes.
"""

import argparse
import json
import os
import sys

FORMATS_IN = ("bert_tf", "keras", "hf", "google", "garden")
FORMATS_OUT = ("bert_tf", "hf", "google", "garden")


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m bert_tf.convert", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--from", dest="source_format", choices=FORMATS_IN,
                        help="input format (detected when omitted)")
    parser.add_argument("--input", required=True, help="checkpoint directory, file or prefix")
    parser.add_argument("--to", dest="target_format", choices=FORMATS_OUT, default="bert_tf")
    parser.add_argument("--output", required=True, help="output directory")
    parser.add_argument("--model", choices=("encoder", "pretrainer"), default="encoder",
                        help="convert the encoder only, or with its MLM/NSP heads")
    parser.add_argument("--vocab_file", help="vocab to record (and check against the input)")
    casing = parser.add_mutually_exclusive_group()
    casing.add_argument("--lower_case", dest="lower_case", action="store_true", default=None)
    casing.add_argument("--cased", dest="lower_case", action="store_false")
    parser.add_argument("--hidden_act", help="override the activation, e.g. gelu or gelu_tanh "
                        "(Model Garden checkpoints do not record it)")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    from bert_tf.checkpoints import loading

    try:
        result = loading.load(args.input, args.model, args.source_format, args.hidden_act,
                              args.vocab_file, args.lower_case)
    except (FileNotFoundError, ValueError, ImportError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    model = result.model
    encoder = getattr(model, "encoder", model)
    vocab = args.vocab_file or result.vocab_file
    lower_case = args.lower_case
    if lower_case is None and result.tokenizer_contract:
        lower_case = result.tokenizer_contract["lower_case"]
    loading.save(model, args.output, args.target_format, vocab, lower_case,
                 result.tokenizer_contract if args.target_format == "bert_tf" else None)
    report = {
        "input": os.path.abspath(args.input),
        "input_format": result.format,
        "output": os.path.abspath(args.output),
        "output_format": args.target_format,
        "model": type(model).__name__,
        "parameters": int(model.count_params()),
        "variables_loaded": len(result.loaded),
        "variables_initialised": result.initialised,
        "encoder_config": encoder.encoder_config.to_dict(),
        "tokenizer_contract": result.tokenizer_contract,
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
