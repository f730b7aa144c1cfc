"""Build a BERT model and print its structure: the smoke test of an install.

    python -m bert_tf.summary --preset bert_mini
    python -m bert_tf.summary --checkpoint path/to/checkpoint --task pretrainer
"""

import argparse
import sys

from bert_tf import console, path_args


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bert_tf.summary", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--preset", default="bert_mini",
                        help="encoder size, e.g. bert_tiny, bert_base")
    source.add_argument("--checkpoint", help="load weights from any supported format instead")
    parser.add_argument("--task", choices=("encoder", "pretrainer"), default="pretrainer")
    parser.add_argument("--list_presets", action="store_true", help="print the preset names")
    args = parser.parse_args(argv)
    problem = args.checkpoint and path_args.input_path_problem(
        args.checkpoint, "--checkpoint", path_args.CHECKPOINT)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return path_args.USAGE_ERROR

    from bert_tf.models import BertEncoder, BertPretrainer, get_preset, preset_names

    if args.list_presets:
        print("\n".join(preset_names()))
        return 0
    if args.checkpoint:
        from bert_tf.checkpoints import loading
        from bert_tf.optional_imports import MissingDependencyError
        try:
            model = loading.load(args.checkpoint, args.task).model
        except (FileNotFoundError, ValueError, MissingDependencyError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    else:
        encoder = BertEncoder.from_encoder_config(get_preset(args.preset))
        model = encoder if args.task == "encoder" else BertPretrainer(encoder)
    model.summary(expand_nested=False)
    encoder = getattr(model, "encoder", model)
    console.print_fields([("encoder config", encoder.encoder_config),
                          ("encoder parameters", f"{encoder.count_params():,}"),
                          (f"{type(model).__name__} parameters", f"{model.count_params():,}")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
