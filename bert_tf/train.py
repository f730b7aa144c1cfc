"""`python -m bert_tf.train`: pretrain or fine-tune as an experiment config says.

    python -m bert_tf.train --config configs/pretrain/bert_mini.yaml --model_dir runs/mini \\
        [--strategy {auto,cpu,one_device,mirrored,multi_worker,tpu}] [--tpu ADDRESS] \\
        [--init_checkpoint PATH] [--set a.b=value ...]

Running the same command again resumes from the newest checkpoint in
`--model_dir`; `--init_checkpoint` is used only when there is none.
"""

import argparse
import logging
import os
import sys

from bert_tf import console, path_args, storage
from bert_tf.training.strategy_names import STRATEGIES


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m bert_tf.train", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="experiment YAML (configs/...)")
    parser.add_argument("--model_dir", required=True,
                        help="checkpoints, params.yaml and TensorBoard logs; resumed if present")
    parser.add_argument("--strategy", choices=STRATEGIES, default=None,
                        help="overrides runtime.strategy (default: auto)")
    parser.add_argument("--tpu", default=None,
                        help="TPU name or grpc:// address (overrides runtime.tpu)")
    parser.add_argument("--init_checkpoint", default=None,
                        help="weights to start from (ours, Google TF1, Hugging Face, Model "
                             "Garden) when model_dir has no checkpoint")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="override a config value, e.g. "
                        "trainer.train_steps=1000 (repeatable)")
    parser.add_argument("--allow_data_change", action="store_true",
                        help="resume a run although the training data or batching settings "
                             "differ from its params.yaml (it then no longer matches an "
                             "uninterrupted run)")
    console.add_verbose_flag(parser)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    # Before a scheme path imports TensorFlow: its start-up lines stay hidden.
    console.setup(args.verbose)
    problem = (path_args.scheme_problem(("--config", args.config), ("--model_dir", args.model_dir))
               or init_checkpoint_problem(args.init_checkpoint, args.model_dir))
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return path_args.USAGE_ERROR

    from bert_tf import config as config_lib
    from bert_tf import tasks

    overrides = list(args.overrides)
    if args.strategy:
        overrides.append(f"runtime.strategy={args.strategy}")
    if args.tpu is not None:
        overrides.append(f"runtime.tpu={args.tpu}")
    try:
        task_class, experiment = tasks.load_experiment(args.config, overrides)
    except (config_lib.ConfigError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        return run(task_class, experiment, args.model_dir, args.init_checkpoint,
                   args.allow_data_change)
    except KeyboardInterrupt:
        # Ctrl-C outside the train loop (which saves and stops on its own).
        print("\ninterrupted; run the same command to resume from the last checkpoint",
              file=sys.stderr)
        return 130


def init_checkpoint_problem(init_checkpoint, model_dir):
    """The one-line error when `--init_checkpoint` will be read but is not there, else None.

    A run that resumes from its own checkpoint never reads it, so it is not
    checked then.

    Args:
      init_checkpoint: the option's value, or None.
      model_dir: the run directory.
    """
    # TensorFlow's CheckpointManager keeps this state file beside a run's checkpoints.
    if not init_checkpoint or storage.isfile(os.path.join(model_dir, "checkpoint")):
        return None
    return path_args.input_path_problem(init_checkpoint, "--init_checkpoint",
                                        path_args.CHECKPOINT)


def run(task_class, experiment, model_dir, init_checkpoint=None, allow_data_change=False,
        plan=None):
    """Sets up TensorFlow for `experiment.runtime`, then trains; returns the exit code.

    Args:
      task_class: the registered `Task` subclass.
      experiment: its loaded experiment config.
      model_dir: the run directory (resumed when it holds a checkpoint).
      init_checkpoint: weights for a fresh run.
      allow_data_change: resume although the training data settings changed.
      plan: a `bert_tf.training.progress.RunPlan` when this training is one
        phase of several (the demo's): the progress bar names the phase and
        estimates the whole run.
    """
    import keras
    import tensorflow as tf

    from bert_tf.optional_imports import MissingDependencyError
    from bert_tf.training import (
        checkpointing,
        cluster_shape,
        divergence,
        exit_codes,
        lost_workers,
        run_directory,
        strategies,
        trainer,
    )

    runtime = experiment.runtime
    if runtime.logical_cpu_devices > 1:
        strategies.split_cpu(runtime.logical_cpu_devices)
    if runtime.deterministic:
        tf.config.experimental.enable_op_determinism()
    keras.utils.set_random_seed(runtime.seed)
    task = task_class(experiment)
    try:
        strategy = strategies.create_strategy(runtime.strategy, runtime.tpu,
                                              runtime.logical_cpu_devices,
                                              runtime.worker_timeout_seconds)
        # Resolves the experiment (fine-tuning takes the encoder and vocabulary from the
        # checkpoint), validates it and checks model_dir's run before building anything.
        run_trainer = trainer.Trainer(task, experiment, model_dir, strategy, init_checkpoint,
                                      allow_data_change=allow_data_change, plan=plan)
        result = run_trainer.train()
    except lost_workers.LostWorkerError as e:
        logging.debug("a worker was lost", exc_info=True)
        print(f"error: {e} (exit code {exit_codes.LOST_WORKER_EXIT_CODE})", file=sys.stderr)
        # TensorFlow's teardown then waits seconds on the lost worker; nothing is left to
        # write (checkpoint and summaries are closed), so leave now, as the preemption exit
        # does, and the bound on stopping stays the heartbeat timeout.
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(exit_codes.LOST_WORKER_EXIT_CODE)
    except cluster_shape.ShapeError as e:
        # The batch does not split over this cluster: the command must change.
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (run_directory.IncompatibleRunError, divergence.TrainingDivergedError, ValueError,
            FileNotFoundError, RuntimeError, MissingDependencyError) as e:
        logging.debug("training failed", exc_info=True)
        print(f"error: {e}", file=sys.stderr)
        return 1
    except (OSError, tf.errors.OpError) as e:
        problem = checkpointing.unwritable_run_directory(e, model_dir)
        if problem is None:
            raise
        logging.debug("writing the run directory failed", exc_info=True)
        print(f"error: {problem}", file=sys.stderr)
        return 1
    if result.stopped_by_signal:
        return 0
    summary = "  ".join(f"{k} {v:.4f}" for k, v in sorted(result.eval_metrics.items()))
    if result.already_complete:
        print(f"the run in {storage.abspath(model_dir)} was already complete at step "
              f"{result.step} (trainer.train_steps); nothing to do. Its last evaluation: "
              f"{summary or 'none recorded'}")
    else:
        print(f"finished at step {result.step}; eval: {summary or 'none'}")
    console.print_fields([("weights fingerprint", result.weights_fingerprint),
                          ("checkpoints and logs", storage.abspath(model_dir)),
                          ("TensorBoard", f"tensorboard --logdir {storage.abspath(model_dir)}")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
