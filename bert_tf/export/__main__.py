"""`python -m bert_tf.export`: a model directory -> a versioned SavedModel or ONNX model.

    python -m bert_tf.export --model_dir runs/sst2 --export_dir exports/sst2 \\
        [--format saved_model|onnx] [--version N] [--max_seq_length L] [--quantize int8]
"""

import argparse
import json
import os
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
                        help="int8 weights, activations quantized per token at every "
                             "call: the SavedModel's Transformer blocks run TensorFlow's "
                             "stock int8 matmul (every CPU, oneDNN on or off); ONNX uses "
                             "ONNX Runtime's dynamic quantization")
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
    before = version_kinds(args.export_dir)
    try:
        export = export_onnx_model_dir if args.format == "onnx" else export_model_dir
        path = export(args.model_dir, args.export_dir, args.version, args.max_seq_length,
                      quantization=args.quantize)
    # OSError covers a missing or unreadable directory and an existing version.
    except (OSError, ValueError, MissingDependencyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    note = mixed_versions_note(args.export_dir, before, version_kinds(args.export_dir))
    if note:
        print(f"note: {note}", file=sys.stderr)
    print(path)
    return 0


def version_kinds(export_dir: str) -> dict[int, str]:
    """{version: "float32 SavedModel", "int8 ONNX", ...} of the versions under `export_dir`.

    Args:
      export_dir: a model's export base (`EXPORTS/NAME`).
    """
    from bert_tf import storage
    from bert_tf.export import exporter, onnx_inputs, versions

    kinds = {}
    for version in versions.existing_versions(export_dir):
        directory = os.path.join(export_dir, str(version))
        for metadata_path, format_name in (
                (os.path.join(directory, "assets.extra", exporter.METADATA_FILE), "SavedModel"),
                (os.path.join(directory, onnx_inputs.METADATA_FILE), "ONNX")):
            try:
                quantization = json.loads(storage.read_text(metadata_path)).get("quantization")
            except (OSError, ValueError):
                continue
            kinds[version] = f"{quantization or 'float32'} {format_name}"
            break
    return kinds


def mixed_versions_note(export_dir: str, before: dict[int, str],
                        after: dict[int, str]) -> str | None:
    """What the new version changes for TF Serving when `export_dir` now mixes kinds, or None.

    TF Serving serves the highest version of a model base: an int8 export written
    beside a float one silently replaces it on the server.

    Args:
      export_dir: the export base.
      before, after: `version_kinds` before and after the export.
    """
    new = sorted(set(after) - set(before))
    if not new or len(set(after.values())) < 2:
        return None
    newest = max(after)
    listed = ", ".join(f"{version} ({kind})" for version, kind in sorted(after.items()))
    precision, format_name = after[new[-1]].split()
    suffix = "_".join(word for word in (format_name == "ONNX" and "onnx", precision) if word)
    return (f"{export_dir} now holds versions {listed}; TF Serving serves the highest, "
            f"{newest} ({after[newest]}). To serve them side by side, export each kind "
            f"to its own --export_dir (e.g. {export_dir.rstrip('/')}_{suffix}).")


if __name__ == "__main__":
    sys.exit(main())
