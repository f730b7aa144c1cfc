"""`python -m bert_tf.evaluate`: a fine-tuned run's official metrics.

    python -m bert_tf.evaluate --model_dir runs/sst2 [--split dev] [--input_file FILE] \\
        [--output_dir DIR] [--batch_size 64] [--set data.key=value ...]

Without --split / --input_file: the sources the run evaluated on during
training (GLUE dev, SQuAD's eval_file, CoNLL testa + testb, SWAG's
eval_file). GLUE runs take --split, the others --input_file. Prints one
`name value` line per metric; --output_dir also writes, per source, the
predictions (GLUE: `<TASK>_<split>_predictions.tsv` with each example's id,
prediction and gold label, or the submission file of a test split) and
`metrics_<source>.json`. Options that cannot work together (a split the task
lacks or whose file is missing, a test split without --output_dir, ...) are
refused before the model is loaded.
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
    from bert_tf.training.trainer import PARAMS_FILE

    if not storage.isdir(model_dir):
        raise FileNotFoundError(f"model directory {model_dir} does not exist")
    params = os.path.join(model_dir, PARAMS_FILE)
    if not storage.isfile(params):
        raise FileNotFoundError(f"{params} not found: is {model_dir} a bert_tf training run?")
    task_class, experiment = tasks.load_experiment(params, overrides)
    if not task_class.supports_evaluation:
        raise ValueError(f"{model_dir} is a {experiment.task!r} run; evaluate and predict "
                         "are for fine-tuning runs")
    task = task_class(experiment)
    task.validate()
    return task


def restore_model(task, model_dir):
    """(model, checkpoint prefix): `task`'s model with the run's newest weights."""
    import tensorflow as tf

    from bert_tf.checkpoints import native
    from bert_tf.training import precision as precision_lib

    # A run's params.yaml holds the policy its trainer resolved; `auto` comes only from --set.
    experiment = precision_lib.resolve_experiment(task.experiment, tf.distribute.get_strategy())
    model = task.build_model(dtype=precision_lib.model_dtype(experiment.runtime.mixed_precision))
    return model, native.restore_weights(model, model_dir)


def load_run(model_dir, overrides=()):
    """(task, model, checkpoint prefix) of a fine-tuning run's newest checkpoint.

    Args: see `load_task`.
    """
    task = load_task(model_dir, overrides)
    return (task, *restore_model(task, model_dir))


def evaluate_run(model_dir, sources=None, output_dir=None, batch_size=64, overrides=()):
    """Metrics `{name: value}` of a fine-tuning run on `sources` (default: its own).

    The sources are checked (`Task.check_sources`) before the model is built.

    Args:
      model_dir: the run's directory (`params.yaml` and checkpoints).
      sources: GLUE splits or data files; None or empty: the task's
        evaluation sources.
      output_dir: when given, prediction files and metrics JSON go there.
      batch_size: examples per model call.
      overrides: `a.b=c` strings applied to the run's `params.yaml`.
    """
    task = load_task(model_dir, overrides)
    task.check_sources(list(sources or ()), output_dir)
    return _evaluate(task, model_dir, sources, output_dir, batch_size)


def _evaluate(task, model_dir, sources, output_dir, batch_size):
    from bert_tf.training.inference import inference_fn

    model, prefix = restore_model(task, model_dir)
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
        metrics = _evaluate(task, args.model_dir, sources, output_dir, args.batch_size)
    except (config_lib.ConfigError, ValueError, OSError, MissingDependencyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for name, value in sorted(metrics.items()):
        print(f"{name} {value:.4f}")
    if output_dir:
        print(f"predictions written to {storage.abspath(output_dir)}")
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bert_tf.evaluate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_source_arguments(parser)
    parser.add_argument("--output_dir", default=None, help="also write predictions here")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    return run_and_report(args, args.output_dir)


if __name__ == "__main__":
    sys.exit(main())
