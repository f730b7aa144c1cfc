"""`python -m bert_tf.export`: a model directory -> a versioned SavedModel or ONNX model.

    python -m bert_tf.export --model_dir runs/sst2 --export_dir exports/sst2 \\
        [--format saved_model|onnx] [--version N] [--max_seq_length L] [--quantize int8]
"""

import argparse
import sys

from bert_tf import console, path_args

EXPECTED = "a bert_tf model directory (a training run's model_dir or convert's output)"


def build_parser():
    """Command-line options."""
    parser = argparse.ArgumentParser(
        prog="python -m bert_tf.export",
        description="Export a bert_tf model directory as a TF Serving SavedModel "
                    "that takes raw text, or as an ONNX model that takes token ids.")
    parser.add_argument("--model_dir", required=True,
                        help="bert_tf model directory (bert_tf_model.json, vocab.txt, ckpt-N)")
    parser.add_argument("--export_dir", required=True,
                        help="EXPORTS/NAME: versions are written as EXPORTS/NAME/<version>")
    parser.add_argument("--version", type=int, default=None,
                        help="version number (default: one more than the highest existing)")
    parser.add_argument("--max_seq_length", type=int, default=None,
                        help="overrides the task's max_seq_length (required when the "
                             "model directory records no task)")
    parser.add_argument("--format", choices=("saved_model", "onnx"), default="saved_model",
                        help="saved_model (raw text in, for TF Serving and Keras) or onnx "
                             "(token ids in, for ONNX Runtime and Triton; needs the onnx "
                             "extra)")
    parser.add_argument("--quantize", choices=("int8",), default=None,
                        help="int8 weights with activations quantized per call: the "
                             "SavedModel's Transformer blocks run TensorFlow's oneDNN int8 "
                             "matmul (x86-64); ONNX uses ONNX Runtime's dynamic quantization")
    console.add_verbose_flag(parser)
    return parser


def main(argv=None):
    """Runs the export; returns the process exit code."""
    args = build_parser().parse_args(argv)
    # Before a scheme path imports TensorFlow: its start-up lines stay hidden.
    console.setup(args.verbose)
    problem = (path_args.scheme_problem(("--export_dir", args.export_dir))
               or path_args.input_path_problem(args.model_dir, "--model_dir", EXPECTED))
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return path_args.USAGE_ERROR
    from bert_tf.export.exporter import check_model_dir, export_model_dir
    from bert_tf.export.onnx_export import export_onnx_model_dir
    from bert_tf.optional_imports import MissingDependencyError

    try:
        # A directory that holds no bert_tf model is a wrong --model_dir: a usage error.
        check_model_dir(args.model_dir)
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        return path_args.USAGE_ERROR
    try:
        export = export_onnx_model_dir if args.format == "onnx" else export_model_dir
        path = export(args.model_dir, args.export_dir, args.version, args.max_seq_length,
                      quantization=args.quantize)
    # OSError covers a missing or unreadable directory and an existing version.
    except (OSError, ValueError, MissingDependencyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
