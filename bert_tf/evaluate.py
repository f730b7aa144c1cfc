"""`python -m bert_tf.evaluate`: a fine-tuned run's official metrics.

    python -m bert_tf.evaluate --model_dir runs/sst2 [--checkpoint ckpt-N] [--split dev] \\
        [--input_file FILE] [--output_dir DIR] [--batch_size 64] [--set data.key=value ...]
    python -m bert_tf.evaluate --model_dir runs/sst2 --watch [--poll_seconds 30] \\
        [--timeout SECONDS] [--best_metric NAME] [--best_mode auto|max|min] \\
        [--export_best EXPORTS/NAME]

It evaluates the run's newest checkpoint, or the one --checkpoint names (`ckpt-N`).

Without --split / --input_file: the sources the run evaluated on during
training (GLUE dev, SQuAD's eval_file, CoNLL testa + testb, SWAG's
eval_file). GLUE runs take --split, the others --input_file. Prints one
`name value` line per metric; --output_dir also writes, per source, the
predictions (GLUE: `<TASK>_<split>_predictions.tsv` with each example's id,
prediction and gold label, or the submission file of a test split) and
`metrics_<source>.json`. Options that cannot work together (a split the task
lacks or whose file is missing, a test split without --output_dir, ...) are
refused before the model is loaded.

--watch evaluates beside a training run (Model Garden's continuous_eval):
every --poll_seconds it looks for new checkpoints and evaluates each, in step
order, on the run's own evaluation sources; writes the metrics to TensorBoard
(RUN/eval/, at the checkpoint's step) and to RUN/eval_history.jsonl; keeps
the best checkpoint by --best_metric in RUN/best/ (a model directory that
export reads) and, with --export_best, exports each new best as a new
version. It stops after the run's final checkpoint (trainer.train_steps),
or after --timeout seconds without a new one. Started again, it skips the
checkpoints its history lists.
"""

import argparse
import logging
import os
import sys

from bert_tf import console, path_args, storage

EXPECTED_RUN = "a fine-tuning run's model_dir (params.yaml and ckpt-N files)"


def add_source_arguments(parser):
    """The options `evaluate` and `predict` share."""
    parser.add_argument("--model_dir", required=True, help="a fine-tuning run's model_dir")
    parser.add_argument("--checkpoint", default=None, metavar="ckpt-N",
                        help="the run's checkpoint to use (default: its newest)")
    parser.add_argument("--split", action="append", default=[],
                        help="GLUE split, e.g. dev, test, dev_matched (repeatable)")
    parser.add_argument("--input_file", action="append", default=[],
                        help="SQuAD JSON, CoNLL or SWAG file (repeatable)")
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="override a value of the run's params.yaml")
    console.add_verbose_flag(parser)


def load_task(model_dir, overrides=()):
    """The validated task of a fine-tuning run, from its `params.yaml` (no model built).

    The run's `params.yaml` holds the resolved experiment (encoder,
    vocabulary, casing and data options), so `model_dir` is all that is
    needed; `overrides` (`a.b=c`) adjust data options such as
    `data.max_eval_examples`.

    Raises:
      FileNotFoundError: `model_dir` does not exist or is not a training run.
      ValueError: the run's task has no host evaluation (e.g. pretraining).
    """
    from bert_tf import tasks
    from bert_tf.training.run_directory import PARAMS_FILE

    if not storage.isdir(model_dir):
        raise FileNotFoundError(f"model directory {model_dir} does not exist")
    params = os.path.join(model_dir, PARAMS_FILE)
    if not storage.isfile(params):
        raise FileNotFoundError(f"{params} not found: is {model_dir} a bert_tf training run?")
    task_class, experiment = tasks.load_experiment(params, overrides, recorded=True)
    if not task_class.supports_evaluation:
        raise ValueError(f"{model_dir} is a {experiment.task!r} run; evaluate and predict "
                         "are for fine-tuning runs")
    task = task_class(experiment)
    task.validate()
    return task


def restore_model(task, model_dir, checkpoint=None):
    """(model, checkpoint prefix): `task`'s model with the weights of the run's newest
    checkpoint, or of the checkpoint prefix `checkpoint` (see `checkpoint_prefix`)."""
    from bert_tf import continuous_eval
    from bert_tf.checkpoints import native

    model = continuous_eval.build_model(task)
    if checkpoint is None:
        return model, native.restore_weights(model, model_dir)
    continuous_eval.restore_checkpoint(model, checkpoint)
    return model, checkpoint


def load_run(model_dir, overrides=()):
    """(task, model, checkpoint prefix) of a fine-tuning run's newest checkpoint.

    Args: see `load_task`.
    """
    task = load_task(model_dir, overrides)
    return (task, *restore_model(task, model_dir))


def evaluate_run(model_dir, sources=None, output_dir=None, batch_size=64, overrides=(),
                 checkpoint=None):
    """Metrics `{name: value}` of a fine-tuning run on `sources` (default: its own).

    The sources and the checkpoint are checked (`Task.check_sources`,
    `checkpoint_prefix`) before the model is built.

    Args:
      model_dir: the run's directory (`params.yaml` and checkpoints).
      sources: GLUE splits or data files; None or empty: the task's
        evaluation sources.
      output_dir: when given, prediction files and metrics JSON go there.
      batch_size: examples per model call.
      overrides: `a.b=c` strings applied to the run's `params.yaml`.
      checkpoint: the run's checkpoint to evaluate (`ckpt-N`); None: its newest.
    """
    task = load_task(model_dir, overrides)
    task.check_sources(list(sources or ()), output_dir)
    return _evaluate(task, model_dir, sources, output_dir, batch_size,
                     checkpoint_prefix(model_dir, checkpoint))


def checkpoint_prefix(model_dir, checkpoint):
    """The prefix of the run's checkpoint `checkpoint` (`ckpt-N`), or None for None.

    Raises:
      continuous_eval.CheckpointNotFoundError (a ValueError): listing the run's checkpoints.
    """
    if checkpoint is None:
        return None
    from bert_tf import continuous_eval

    return continuous_eval.checkpoint_prefix(model_dir, checkpoint)


def _evaluate(task, model_dir, sources, output_dir, batch_size, checkpoint=None):
    from bert_tf.training.inference import inference_fn

    model, prefix = restore_model(task, model_dir, checkpoint)
    logging.info("loaded %s", prefix)
    return task.evaluate_model(inference_fn(model), list(sources or ()) or None, output_dir,
                               batch_size)


# The option that names each kind of source (`Task.source_type`).
_SOURCE_OPTIONS = {"split": "--split", "file": "--input_file"}


def requested_sources(task, splits, input_files, predicting=False):
    """The sources named on the command line, as the task takes them.

    Args:
      task: the run's task.
      splits, input_files: the values of `--split` and `--input_file`.
      predicting: True for `predict`, whose default is the task's
        `prediction_sources` (evaluate's: the run's own evaluation sources).

    Returns:
      the sources; empty for the run's own evaluation sources.

    Raises:
      ValueError: an option the task does not take, a source named twice,
        or `predict` with no source on a task that has no default.
    """
    option = _SOURCE_OPTIONS[task.source_type]
    for other, values in (("--split", splits), ("--input_file", input_files)):
        if other != option and values:
            raise ValueError(f"a {task.name!r} run takes {option}, not {other} "
                             f"({other} {values[0]})")
    sources = list(splits or input_files)
    for i, source in enumerate(sources):
        if source in sources[:i]:
            raise ValueError(f"{option} {source} is given twice")
    if not sources and predicting:
        sources = list(task.prediction_sources)
        if not sources:
            raise ValueError(f"predict on a {task.name!r} run needs {option}: the data "
                             "to predict")
    return sources


def check_options(args, output_dir):
    """Refuses options no task can run with, before anything is loaded."""
    if args.batch_size < 1:
        raise ValueError(f"--batch_size must be at least 1, got {args.batch_size}")
    if output_dir and storage.exists(output_dir) and not storage.isdir(output_dir):
        raise ValueError(f"--output_dir {output_dir} is a file, not a directory")


def run_and_report(args, output_dir, predicting=False):
    """Runs the model on the chosen sources; prints the metrics; returns the exit code.

    Every option is checked, against the run's task too, before the model
    is built: an impossible combination fails at once with one line.
    """
    # Before a scheme path imports TensorFlow: its start-up lines stay hidden.
    console.setup(args.verbose)
    problem = (path_args.scheme_problem(
        ("--output_dir", output_dir), *(("--input_file", path) for path in args.input_file))
               or path_args.input_path_problem(args.model_dir, "--model_dir", EXPECTED_RUN))
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return path_args.USAGE_ERROR
    from bert_tf import config as config_lib
    from bert_tf.optional_imports import MissingDependencyError

    try:
        check_options(args, output_dir)
        task = load_task(args.model_dir, args.overrides)
        sources = requested_sources(task, args.split, args.input_file, predicting)
        task.check_sources(sources, output_dir)
        checkpoint = checkpoint_prefix(args.model_dir, args.checkpoint)
        metrics = _evaluate(task, args.model_dir, sources, output_dir, args.batch_size,
                            checkpoint)
    except (config_lib.ConfigError, ValueError, OSError, MissingDependencyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for name, value in sorted(metrics.items()):
        print(f"{name} {value:.4f}")
    if output_dir:
        print(f"predictions written to {storage.abspath(output_dir)}")
    return 0


DEFAULT_POLL_SECONDS = 30.0
# The options that only --watch takes (their defaults are None, to tell them given).
_WATCH_OPTIONS = ("poll_seconds", "timeout", "best_metric", "best_mode", "export_best")
# What --watch does not take: it evaluates the run's own sources, each checkpoint in turn.
_NOT_WITH_WATCH = ("checkpoint", "split", "input_file", "output_dir")


def add_watch_arguments(parser):
    """The options of `--watch` (evaluation beside a training run)."""
    group = parser.add_argument_group("evaluating beside a training run")
    group.add_argument("--watch", action="store_true",
                       help="evaluate every new checkpoint of the run as the trainer writes "
                            "it, until the run's final one")
    group.add_argument("--poll_seconds", type=float, default=None, metavar="SECONDS",
                       help=f"how often to look for a new checkpoint (default "
                            f"{DEFAULT_POLL_SECONDS:g})")
    group.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                       help="stop after this long without a new checkpoint (default: wait "
                            "for the run's final checkpoint)")
    group.add_argument("--best_metric", default=None, metavar="NAME",
                       help="keep the best checkpoint by this metric in MODEL_DIR/best "
                            "(default: the task's main metric, e.g. accuracy, or F1 for "
                            "MRPC, SQuAD and NER)")
    group.add_argument("--best_mode", choices=("auto", "max", "min"), default=None,
                       help="max: higher is better; min: lower is better; auto (default): "
                            "lower for losses, errors and perplexities, higher otherwise")
    group.add_argument("--export_best", default=None, metavar="EXPORTS/NAME",
                       help="export each new best checkpoint there as the next SavedModel "
                            "version (TF Serving then serves the best so far)")


def watch_problem(args):
    """The one-line error of options that do not fit together with (or without) --watch."""
    def flag(name):
        return "--" + name

    if not args.watch:
        given = [flag(name) for name in _WATCH_OPTIONS if getattr(args, name) is not None]
        return f"{given[0]} is an option of --watch" if given else None
    given = [flag(name) for name in _NOT_WITH_WATCH if getattr(args, name)]
    if given:
        return (f"{given[0]} does not go with --watch, which evaluates every checkpoint on "
                "the run's own evaluation sources")
    for name in ("poll_seconds", "timeout"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            return f"{flag(name)} must be a positive number of seconds, got {value:g}"
    if args.batch_size < 1:
        return f"--batch_size must be at least 1, got {args.batch_size}"
    return None


def watch_and_report(args):
    """Runs `--watch`: evaluates the run's checkpoints as they appear; returns the exit code."""
    console.setup(args.verbose)
    from bert_tf import config as config_lib
    from bert_tf import continuous_eval
    from bert_tf.optional_imports import MissingDependencyError

    poll = args.poll_seconds or DEFAULT_POLL_SECONDS
    try:
        if not continuous_eval.wait_for_run(args.model_dir, poll, args.timeout):
            raise FileNotFoundError(f"no training run started in {args.model_dir} within "
                                    f"--timeout {args.timeout:g} s (no params.yaml)")
        task = load_task(args.model_dir, args.overrides)
        watcher = continuous_eval.Watcher(
            task, args.model_dir, batch_size=args.batch_size, poll_seconds=poll,
            timeout_seconds=args.timeout, best_metric=args.best_metric,
            best_mode=args.best_mode or "auto", export_dir=args.export_best)
        result = watcher.run()
    except (config_lib.ConfigError, ValueError, OSError, MissingDependencyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted; run the same command to go on (the checkpoints in "
              f"{continuous_eval.HISTORY_FILE} are not evaluated again)", file=sys.stderr)
        return 130
    if result.complete:
        print("evaluated up to the run's final checkpoint "
              f"(step {continuous_eval.final_step(args.model_dir)})")
    else:
        print(f"no new checkpoint for {args.timeout:g} s: stopped")
    best = result.best
    if best:
        print(f"best {best['metric']}: {best['value']:.4f} at {best['checkpoint']}, in "
              f"{watcher.best.directory}" + (f"; exported to {best['export']}"
                                             if best.get("export") else ""))
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bert_tf.evaluate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_source_arguments(parser)
    parser.add_argument("--output_dir", default=None, help="also write predictions here")
    add_watch_arguments(parser)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    problem = watch_problem(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return path_args.USAGE_ERROR
    if args.watch:
        # The run may not have started yet: its directory is waited for, not checked.
        return watch_and_report(args)
    return run_and_report(args, args.output_dir)


if __name__ == "__main__":
    sys.exit(main())
