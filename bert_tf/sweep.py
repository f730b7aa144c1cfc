"""`python -m bert_tf.sweep`: the paper's fine-tuning grid, keeping the best dev score.

    python -m bert_tf.sweep --config configs/finetune/glue_mrpc.yaml --init_checkpoint CKPT \\
        --model_dir runs/mrpc_sweep [--learning_rates 5e-5,3e-5,2e-5] [--epochs 2,3,4] \\
        [--set a.b=value ...]

As in the BERT paper (section 4.1, appendix A.3), one fine-tuning run per
learning rate and epoch count, each in `model_dir/lr<lr>_epochs<n>/`; the
run with the best main dev metric (GLUE: the task's official metric first;
SQuAD and NER: F1; SWAG: accuracy) wins. Runs execute one after another as
`python -m bert_tf.train` processes; running the command again skips the
finished runs and resumes an interrupted one. `model_dir/sweep_results.json`
lists every run's metrics and names the best.

`sweep(..., run_training=bert_tf.train.main)` trains each run in the calling
process instead, with the same command line (for a file system that only
this process sees, such as TensorFlow's in-memory `ram://`).
"""

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence

from bert_tf import console, path_args, storage
from bert_tf.training import run_directory


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m bert_tf.sweep", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True)
    parser.add_argument("--init_checkpoint", required=True)
    parser.add_argument("--model_dir", required=True, help="one sub-directory per run")
    parser.add_argument("--learning_rates", default="5e-5,3e-5,2e-5")
    parser.add_argument("--epochs", default="2,3,4")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="applied to every run")
    console.add_verbose_flag(parser)
    return parser.parse_args(argv)


def _numbers(text, flag, kind):
    try:
        values = [kind(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"{flag} must be comma-separated numbers, got {text!r}") from None
    if not values or any(value <= 0 for value in values):
        raise ValueError(f"{flag} must list positive numbers, got {text!r}")
    return values


def run_name(learning_rate, epochs):
    return f"lr{learning_rate:g}_epochs{epochs:g}"


def train_in_subprocess(argv: Sequence[str]) -> int:
    """Runs `python -m bert_tf.train` with `argv` in a new process; returns its exit code.

    Each run then frees its memory and its TensorFlow state when it ends.

    Args:
      argv: the command line after `python -m bert_tf.train`.
    """
    return subprocess.run([sys.executable, "-m", "bert_tf.train", *argv]).returncode


def sweep(config: str, init_checkpoint: str, model_dir: str, learning_rates: Sequence[float],
          epochs: Sequence[float], overrides: Sequence[str] = (),
          run_training: Callable[[list[str]], int] = train_in_subprocess) -> dict:
    """Runs the grid; returns the summary written to `model_dir/sweep_results.json`.

    Args:
      config: the fine-tuning experiment (a packaged config name or a YAML path).
      init_checkpoint: the pretrained checkpoint every run starts from.
      model_dir: the sweep's directory; each run goes to a sub-directory.
      learning_rates, epochs: the grid.
      overrides: `a.b=c` strings applied to every run.
      run_training: trains one run from `python -m bert_tf.train`'s command line and
        returns its exit code: `train_in_subprocess` (default), or `bert_tf.train.main`
        to train in this process.
    """
    from bert_tf import tasks

    task_class, experiment = tasks.load_experiment(config, list(overrides))
    if not task_class.supports_evaluation:
        raise ValueError(f"{config} is a {experiment.task!r} config; a sweep compares dev "
                         "scores, which only fine-tuning tasks report")
    main_metric = task_class(experiment).main_metric
    runs = []
    for learning_rate in learning_rates:
        for epoch_count in epochs:
            name = run_name(learning_rate, epoch_count)
            run_dir = os.path.join(model_dir, name)
            results = run_directory.finished_results(run_dir)
            if results is None:
                argv = ["--config", config, "--model_dir", run_dir,
                        "--init_checkpoint", init_checkpoint,
                        "--set", f"optimizer.learning_rate={learning_rate}",
                        "--set", f"trainer.train_epochs={epoch_count}"]
                for override in overrides:
                    argv += ["--set", override]
                print(f"== {name}", flush=True)
                code = run_training(argv)
                if code != 0:
                    raise RuntimeError(f"run {name} failed with exit code {code}; "
                                       "run the same command to resume it")
                results = run_directory.finished_results(run_dir)
                if results is None:
                    raise RuntimeError(f"run {name} finished without evaluation results "
                                       f"in {run_dir}")
            metrics = results["metrics"]
            if main_metric not in metrics:
                raise RuntimeError(f"run {name} reports {sorted(metrics)}, not {main_metric}")
            runs.append({"run": name, "model_dir": run_dir, "learning_rate": learning_rate,
                         "epochs": epoch_count, "metrics": metrics})
    best = max(runs, key=lambda run: run["metrics"][main_metric])
    summary = {"main_metric": main_metric, "best": best["run"],
               "best_model_dir": best["model_dir"], "runs": runs}
    storage.makedirs(model_dir, exist_ok=True)
    path = os.path.join(model_dir, "sweep_results.json")
    with storage.atomic_write(path, encoding="utf-8") as f:
        json.dump(summary, f, indent=2)
    return summary


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    # Before a scheme path imports TensorFlow: its start-up lines stay hidden.
    console.setup(args.verbose)
    problem = (path_args.scheme_problem(("--config", args.config), ("--model_dir", args.model_dir))
               or path_args.input_path_problem(args.init_checkpoint, "--init_checkpoint",
                                               path_args.CHECKPOINT))
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return path_args.USAGE_ERROR
    from bert_tf import config as config_lib

    try:
        learning_rates = _numbers(args.learning_rates, "--learning_rates", float)
        epochs = _numbers(args.epochs, "--epochs", float)
        summary = sweep(args.config, args.init_checkpoint, args.model_dir, learning_rates,
                        epochs, args.overrides)
    except (config_lib.ConfigError, ValueError, RuntimeError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    metric = summary["main_metric"]
    for run in summary["runs"]:
        marker = "  <- best" if run["run"] == summary["best"] else ""
        print(f"{run['run']:<24} {metric} {run['metrics'][metric]:.4f}{marker}")
    print(f"best: {summary['best_model_dir']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
