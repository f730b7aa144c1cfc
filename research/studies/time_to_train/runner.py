"""Runs the time-to-train benchmark: every recipe's phases until the target or the budget.

Layout of the output directory:

    corpus/                          the study corpus (train/ and heldout/ shards)
    runs/<recipe>/<phase>/           one trainer model_dir per phase
    runs/<reference>/<phase>/kept/   its checkpoints at `quality.reference_steps`
    budgets.json                     the steps fixed for `wall_fraction` recipes
    timing/, timing.json             the timing run (`research.studies.time_to_train.timing`)
    results.json, report.md, plots/  rewritten after every phase

A phase trains with `python -m bert_tf.train`, evaluating on the held-out
batches every `eval_every` steps. While it runs, its newest evaluation
(`eval_results.json`) is watched; once it reaches the target, the trainer is
sent SIGTERM and stops at once after a checkpoint (a few steps past the
crossing at most, which count for nothing); a recipe with `train_to_budget`
is never stopped and trains every phase to its last step. Whether a recipe
reached the target is read from its curves, never from a flag, so a rerun
decides the same: a phase whose curve crossed is done (with `train_to_budget`,
once it also reached its last step), one that reached its last step without
crossing hands its weights to the next phase, and any other resumes from its
newest checkpoint. A lock per phase (`flock`) keeps two processes
from training the same phase. The trainer keeps only its newest checkpoints,
so the watch also copies the reference recipe's checkpoints at
`quality.reference_steps` into `kept/` as they are written.
"""

import glob
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence

from bert_tf import config as config_lib
from bert_tf import tasks
from bert_tf.checkpoints import readable
from bert_tf.tasks.pretraining import PretrainingTask
from bert_tf.training import run_directory
from research.studies import corpus as corpus_lib
from research.studies import scalars, units
from research.studies import spec as study_spec
from research.studies.time_to_train import flops
from research.studies.time_to_train import spec as spec_lib
from tests import shared_data

CORPUS_LOCK = "corpus.lock"
KEPT_DIR = "kept"
# What a checkpoint prefix needs beside its files to load on its own (`bert_tf.checkpoints`).
_CHECKPOINT_COMPANIONS = ("bert_tf_model.json", "vocab.txt")
POLL_SECONDS = 2.0
# Data settings that decide the held-out batches besides the eval_* ones: every phase
# must share them with the reference recipe, or its accuracy is measured on other text.
HELD_OUT_DATA_FIELDS = ("eval_files", "vocab_file", "lower_case", "short_seq_prob",
                        "sentence_pairs", "whole_word_masking", "documents_per_window",
                        "shuffle_buffer_size", "max_sequences_per_row", "packing_window",
                        "mask_token_fraction", "keep_token_fraction", "random_token_fraction")
# Where the steps of every `wall_fraction` recipe's fill_budget phase are fixed when it
# first trains, so a later timing run never changes a budget already trained to.
BUDGETS_FILE = "budgets.json"
HELD_OUT_TRAINER_FIELDS = ("eval_steps", "eval_batch_size")


def _json_override(key, value):
    return f"{key}={json.dumps(value)}"


def _vocab_size(path):
    with open(path, encoding="utf-8") as f:
        return sum(1 for line in f if line.rstrip("\n"))


def first_crossing(curve, target):
    """(index of the first point at or above `target`, or None) of `[(step, value), ...]`."""
    for i, (_, value) in enumerate(curve):
        if value >= target:
            return i
    return None


def kept_checkpoint(model_dir: str, step: int) -> str:
    """The prefix of the copy of `model_dir`'s checkpoint at `step` in its `kept/` folder."""
    return os.path.join(model_dir, KEPT_DIR, f"ckpt-{step}")


def keep_checkpoint(model_dir: str, step: int) -> bool:
    """Copies `ckpt-<step>` of `model_dir` into `kept/` unless it is there already.

    The data files go first and the index last, each through a temporary name, so an
    index in `kept/` always belongs to a whole checkpoint. The run's model metadata and
    vocabulary go along, so the copy loads on its own.

    Args:
      model_dir: a trainer's model directory.
      step: the checkpoint's step.

    Returns:
      Whether the copy exists now (False: that checkpoint is not written yet, or was
      rotated away before it could be copied).
    """
    kept = kept_checkpoint(model_dir, step)
    if os.path.isfile(kept + ".index"):
        return True
    source = os.path.join(model_dir, f"ckpt-{step}")
    if not os.path.isfile(source + ".index"):
        return False
    # Listed in the `checkpoint` state file only once the save is complete.
    listed = [os.path.basename(path) for path in readable.listed_checkpoints(model_dir)]
    if os.path.basename(source) not in listed:
        return False
    folder = os.path.dirname(kept)
    os.makedirs(folder, exist_ok=True)
    files = [*sorted(glob.glob(glob.escape(source) + ".data-*")), source + ".index",
             *(os.path.join(model_dir, name) for name in _CHECKPOINT_COMPANIONS)]
    try:
        for path in files:
            target = os.path.join(folder, os.path.basename(path))
            if os.path.basename(path) in _CHECKPOINT_COMPANIONS and os.path.isfile(target):
                continue
            shutil.copyfile(path, target + ".tmp")
            os.replace(target + ".tmp", target)
    except FileNotFoundError:
        return False  # the trainer's max_to_keep deleted it while it was copied
    return True


class Benchmark:
    """A `TimeToTrainSpec` bound to an output directory.

    Args:
      spec: the benchmark definition.
      out_dir: where everything is written (resumed when it exists).
      profile: the profile name, recorded in results.json.
      log: a function taking one line of progress.
      target: the target value; None: the spec's.
      recipes: names of the recipes this process trains; None: all, in the spec's order.
    """

    def __init__(self, spec: spec_lib.TimeToTrainSpec, out_dir: str, profile: str = "full",
                 log: Callable[[str], None] = print, target: float | None = None,
                 recipes: Sequence[str] | None = None):
        self.spec = spec
        self.out_dir = os.path.abspath(out_dir)
        self.profile = profile
        self.log = log
        self._target = None
        if target is not None:
            self._target, self.target_source = float(target), "given on the command line"
        elif spec.target.value is not None:
            self._target, self.target_source = spec.target.value, "set in the config"
        elif spec.target.from_reference:
            self.target_source = (f"the mean final held-out {spec.target.metric} of the "
                                  f"{len(spec.reference_rows())} runs of recipe "
                                  f"{spec.reference_recipe!r}")
        else:
            self._target = spec_lib.target_value(spec)
            self.target_source = (f"the final held-out {spec.target.metric} of "
                                  f"{spec.target.from_record}")
        names = [recipe.name for recipe in spec.recipes]
        groups = list(dict.fromkeys(recipe.group for recipe in spec.recipes))
        unknown = sorted(set(recipes or ()) - set(names) - set(groups))
        if unknown:
            raise ValueError(f"unknown recipe(s) {', '.join(map(repr, unknown))}; recipes of "
                             f"{spec.name!r}: {', '.join(dict.fromkeys(groups + names))}")
        # A recipe with replicates stands for all of them.
        self.recipes = ([row for name in recipes
                         for row in (spec.replicates(name) if name not in names
                                     else [spec.recipe(name)])]
                        if recipes else spec.recipes)
        self.vocab_file = os.path.join(shared_data.data_dir(), spec.vocab_file)
        self._corpus = None

    @property
    def target(self) -> float:
        """The target value; with `target.from_reference`, infinity until every run of the
        reference has finished (nothing has reached it before)."""
        if self._target is not None:
            return self._target
        finals = [self.final_value(recipe) for recipe in self.spec.reference_rows()]
        return math.inf if None in finals else statistics.fmean(finals)

    def final_value(self, recipe) -> float | None:
        """The target metric of a recipe's last evaluation, once its last phase finished."""
        results = run_directory.finished_results(self.phase_dir(recipe, recipe.phases[-1]))
        return None if results is None else float(results["metrics"][self.spec.target.metric])

    def reading(self, folder: str) -> "Benchmark":
        """This benchmark read in another folder (e.g. its records): the same spec, profile
        and target (when it is not the reference's, which is read there too); nothing is
        trained or built there."""
        return Benchmark(self.spec, folder, self.profile, lambda _: None, self._target)

    # -- paths and configs ---------------------------------------------------------

    def timing_key(self, recipe, phase) -> str:
        """The `timing.json` entry of a phase: replicates share their first row's timing."""
        return f"{self.spec.replicates(recipe.group)[0].name}/{phase.name}"

    def phase_dir(self, recipe, phase):
        return os.path.join(self.out_dir, "runs", recipe.name, phase.name)

    @property
    def corpus(self):
        """The study corpus, built on first use (held under a lock while building)."""
        if self._corpus is None:
            c = self.spec.corpus
            os.makedirs(self.out_dir, exist_ok=True)
            with units.lock_file(os.path.join(self.out_dir, CORPUS_LOCK), wait=True):
                self._corpus = corpus_lib.build_corpus(os.path.join(self.out_dir, "corpus"),
                                                       c.holdout_every, c.num_shards, c.seed)
        return self._corpus

    def phase_overrides(self, recipe, phase, extra=()):
        """The `--set` overrides of a phase: corpus, the benchmark's, the phase's own, the
        evaluation cadence, the held-out measurement, then `extra`."""
        if not os.path.isfile(self.vocab_file):
            raise FileNotFoundError(f"vocab_file {self.vocab_file} does not exist (key "
                                    f"vocab_file, relative to {shared_data.data_dir()})")
        corpus = self.corpus
        every = recipe.eval_every
        return [_json_override("data.train_files", corpus.train_files),
                _json_override("data.eval_files", corpus.heldout_files),
                _json_override("data.vocab_file", self.vocab_file),
                f"data.lower_case={str(self.spec.lower_case).lower()}",
                f"model.encoder.vocab_size={_vocab_size(self.vocab_file)}",
                *self.spec.overrides, *phase.overrides, *self._budget_overrides(recipe, phase),
                f"trainer.eval_every={every}", f"trainer.checkpoint_every={every}",
                f"trainer.steps_per_loop={every}",
                *self.spec.eval_overrides, *extra]

    def _budget_overrides(self, recipe, phase):
        if not phase.fill_budget:
            return []
        steps = self.fixed_budgets().get(recipe.group)
        return [] if steps is None else [f"trainer.train_steps={steps}",
                                         f"optimizer.decay_steps={steps}"]

    def fixed_budgets(self) -> dict[str, int]:
        """`{recipe group: steps of its fill_budget phase}` fixed so far (BUDGETS_FILE)."""
        path = os.path.join(self.out_dir, BUDGETS_FILE)
        if not os.path.isfile(path):
            return {}
        with open(path, encoding="utf-8") as f:
            return {group: entry["steps"] for group, entry in json.load(f).items()}

    def fill_budget_steps(self, recipe) -> int:
        """The steps of the recipe's fill_budget phase, fixed in BUDGETS_FILE on first call.

        Its wall time budget is `wall_fraction` x the reference's mean wall time to the
        target (`report.reference_mean`); the other phases' steps x their measured time
        per step come off it, and the rest buys the fill phase's steps, rounded down to a
        multiple of the recipe's eval_every.

        Raises:
          ValueError: the reference has not reached the target in every run, or the
            timing run is missing, or the budget buys no evaluation interval.
        """
        from research.studies.time_to_train import report, timing

        fixed = self.fixed_budgets()
        if recipe.group in fixed:
            return fixed[recipe.group]
        timings = timing.read(self.out_dir)
        reference = report.reference_mean(self, timings and timings["phases"])
        if reference is None or reference["seconds_to_target"] is None:
            raise ValueError(f"recipe {recipe.name!r} trains to {recipe.wall_fraction:g} of "
                             "the reference's mean wall time to the target: train every run "
                             f"of {self.spec.reference_recipe!r} and time every recipe "
                             "(--timing_only) first")
        seconds = recipe.wall_fraction * reference["seconds_to_target"]
        fill = next(phase for phase in recipe.phases if phase.fill_budget)
        per_step = {phase.name: timings["phases"][self.timing_key(recipe, phase)]
                    ["seconds_per_step"] for phase in recipe.phases}
        for phase in recipe.phases:
            if phase is not fill:
                seconds -= self.experiment(recipe, phase).trainer.train_steps * per_step[
                    phase.name]
        steps = int(seconds / per_step[fill.name]) // recipe.eval_every * recipe.eval_every
        if steps < recipe.eval_every:
            raise ValueError(f"recipe {recipe.name!r}: {recipe.wall_fraction:g} of the "
                             "reference's wall time leaves its phase "
                             f"{fill.name!r} {steps} steps, fewer than one evaluation interval")
        path = os.path.join(self.out_dir, BUDGETS_FILE)
        entries = {}
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                entries = json.load(f)
        entries[recipe.group] = {
            "steps": steps, "phase": fill.name, "wall_fraction": recipe.wall_fraction,
            "reference_seconds_to_target": reference["seconds_to_target"],
            "timing_started_utc": timings["started_utc"],
            "fixed_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        os.makedirs(self.out_dir, exist_ok=True)
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(entries, f, indent=1)
        os.replace(path + ".tmp", path)
        self.log(f"{recipe.group}: {fill.name} gets {steps} steps ({recipe.wall_fraction:g} "
                 f"of the reference's {reference['seconds_to_target'] / 3600:.2f} h to the "
                 "target)")
        return steps

    def experiment(self, recipe, phase):
        """The resolved experiment of a phase (nothing is read but the config and vocab)."""
        config = study_spec.resolve_repo_path(phase.config)
        _, experiment = tasks.load_experiment(config, self.phase_overrides(recipe, phase))
        if experiment.task != "pretraining":
            raise config_lib.ConfigError(f"{config}: recipe {recipe.name!r} phase "
                                         f"{phase.name!r} is a {experiment.task!r} config, "
                                         "not pretraining")
        return experiment

    def step_shape(self, recipe, phase):
        return flops.step_shape(self.experiment(recipe, phase))

    def check_same_measurement(self):
        """Raises ConfigError when a phase's held-out batches differ from the reference's."""
        reference = self.spec.reference_row()
        expected = self._measurement(reference, reference.phases[-1])
        for recipe in self.spec.recipes:
            for phase in recipe.phases:
                found = self._measurement(recipe, phase)
                differing = {key: (expected[key], found[key]) for key in expected
                             if expected[key] != found[key]}
                if differing:
                    listed = "; ".join(f"{key}: {new!r} here, {old!r} in the reference "
                                       f"recipe {reference.name!r}"
                                       for key, (old, new) in differing.items())
                    raise config_lib.ConfigError(
                        f"recipe {recipe.name!r} phase {phase.name!r} would be evaluated on "
                        f"other held-out batches ({listed}); keep them or set them in "
                        "eval_overrides")

    def _measurement(self, recipe, phase):
        experiment = self.experiment(recipe, phase)
        data, trainer = experiment.data, experiment.trainer
        task = PretrainingTask(experiment)
        length, predictions, rate = task.eval_settings()
        found = {f"data.{name}": getattr(data, name) for name in HELD_OUT_DATA_FIELDS}
        # Replicates train on other data seeds: the held-out batches' own seed must agree.
        found["eval seed"] = task.eval_seed
        found.update({f"trainer.{name}": getattr(trainer, name)
                      for name in HELD_OUT_TRAINER_FIELDS})
        # An eval batch size of 0 means the training batch: compare what is used.
        found["trainer.eval_batch_size"] = trainer.eval_batch_size or trainer.global_batch_size
        found.update({"eval max_seq_length": length, "eval max_predictions_per_seq": predictions,
                      "eval masked_lm_prob": rate})
        return found

    # -- state ---------------------------------------------------------------------

    def eval_curve(self, model_dir):
        """[(step, value)] of the target metric's held-out evaluations in `model_dir`."""
        if not os.path.isdir(model_dir):
            return []
        return scalars.read(model_dir)["eval"].get(self.spec.target.metric, [])

    def phase_state(self, recipe, phase):
        """"reached", "budget" (last step, not reached) or "open" (to train or resume).

        A phase of a `train_to_budget` recipe stays open until its last step, crossed or not.
        """
        model_dir = self.phase_dir(recipe, phase)
        finished = run_directory.finished_results(model_dir) is not None
        if recipe.train_to_budget and not finished:
            return "open"
        if first_crossing(self.eval_curve(model_dir), self.target) is not None:
            return "reached"
        return "budget" if finished else "open"

    # -- running -------------------------------------------------------------------

    def run(self) -> dict:
        """Trains the selected recipes in order, each until the target or its budget.

        Checks first that every phase is measured on the reference's held-out
        batches; rewrites the report after every recipe. Returns the results.
        """
        from research.studies.time_to_train import report

        self.check_same_measurement()
        for recipe in self.recipes:
            self.run_recipe(recipe)
            report.write(self)
        return report.write(self)

    def run_recipe(self, recipe):
        """Runs the recipe's phases in order until one reaches the target (with
        `train_to_budget`: all of them, to their last step)."""
        if recipe.wall_fraction:
            self.fill_budget_steps(recipe)
        previous, reached = None, False
        for phase in recipe.phases:
            state = self.phase_state(recipe, phase)
            if state == "open":
                init = self.phase_dir(recipe, previous) if previous else None
                self._train(recipe, phase, init)
                state = self.phase_state(recipe, phase)
            if state == "open":  # held by another process of the benchmark
                return
            if state == "reached" and not reached:
                self.log(f"{recipe.name}: reached {self.spec.target.metric} >= "
                         f"{self.target:.4f} in phase {phase.name}")
                reached = True
            if reached and not recipe.train_to_budget:
                return
            previous = phase
        if recipe.train_to_budget:
            self.log(f"{recipe.name}: trained to the end of its budget")
        elif not reached:
            self.log(f"{recipe.name}: step budget spent without reaching the target")

    def _command(self, recipe, phase, init_checkpoint, extra=()):
        command = [sys.executable, "-m", "bert_tf.train", "--config",
                   study_spec.resolve_repo_path(phase.config),
                   "--model_dir", self.phase_dir(recipe, phase)]
        if init_checkpoint:
            command += ["--init_checkpoint", init_checkpoint]
        for override in self.phase_overrides(recipe, phase, extra):
            command += ["--set", override]
        return command

    def _train(self, recipe, phase, init_checkpoint):
        model_dir = self.phase_dir(recipe, phase)
        os.makedirs(model_dir, exist_ok=True)
        name = f"{recipe.name}/{phase.name}"
        with units.lock_file(os.path.join(model_dir, units.LOCK_FILE), wait=False) as lock:
            if lock is None:
                self.log(f"== {name}: running in another process")
                return
            if self.phase_state(recipe, phase) != "open":
                return
            log_path = os.path.join(model_dir, units.LOG_FILE)
            self.log(f"== {name}: running (log: {log_path})")
            command = self._command(recipe, phase, init_checkpoint)
            started = time.monotonic()
            with open(log_path, "a", encoding="utf-8") as log_file:
                log_file.write("$ " + " ".join(command) + "\n")
                log_file.flush()
                env = dict(os.environ, PYTHONUNBUFFERED="1")
                env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
                process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT,
                                           env=env, pass_fds=(lock.fileno(),))
                keep = (self.spec.quality.reference_steps
                        if recipe.group == self.spec.reference_recipe else [])
                stopped = self._watch(process, model_dir, keep,
                                      stop_at_target=not recipe.train_to_budget)
            seconds = time.monotonic() - started
            with open(os.path.join(model_dir, units.TIMES_FILE), "a", encoding="utf-8") as f:
                f.write(json.dumps({"seconds": round(seconds, 1),
                                    "exit_code": process.returncode,
                                    "stopped_at_target": stopped}) + "\n")
        if process.returncode != 0:
            raise units.UnitFailedError(f"{name} failed with exit code {process.returncode}; "
                                        f"see {log_path}; run the same command to resume it")
        if self.phase_state(recipe, phase) == "open":
            unmet = "" if recipe.train_to_budget else " without reaching the target"
            raise units.UnitFailedError(f"{name} stopped before its last step{unmet} (signal?); "
                                        f"run the same command to resume it ({log_path})")
        self.log(f"== {name}: done in {seconds / 60:.1f} min")

    def _watch(self, process, model_dir, keep_steps=(), stop_at_target=True):
        """Waits for the trainer; SIGTERMs it once its newest evaluation reaches the target
        (unless not `stop_at_target`).

        Copies its checkpoints at `keep_steps` into `kept/` as they appear (the
        trainer rotates checkpoints away after `trainer.max_to_keep` newer ones).
        Returns whether it was stopped that way.
        """
        results_path = os.path.join(model_dir, "eval_results.json")
        stopped = False
        to_keep = list(keep_steps)
        while process.poll() is None:
            time.sleep(POLL_SECONDS)
            to_keep = [step for step in to_keep if not keep_checkpoint(model_dir, step)]
            if stopped or not stop_at_target or not os.path.isfile(results_path):
                continue
            try:
                with open(results_path, encoding="utf-8") as f:
                    newest = json.load(f)
            except (OSError, ValueError):
                continue  # replaced while read: the next poll sees it whole
            value = newest.get("metrics", {}).get(self.spec.target.metric)
            if value is not None and value >= self.target:
                self.log(f"   step {newest['step']}: {self.spec.target.metric} {value:.4f} >= "
                         f"{self.target:.4f}: stopping the trainer")
                process.send_signal(signal.SIGTERM)
                stopped = True
        for step in to_keep:  # the last save may come after the last poll
            keep_checkpoint(model_dir, step)
        return stopped
