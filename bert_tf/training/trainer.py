"""The trainer: strategy, loop, checkpoints, evaluation, summaries and faults.

A custom loop rather than `Model.fit`: Keras 3's `fit` fails under
`MultiWorkerMirroredStrategy`, and its `BackupAndRestore` restores neither
the input position nor the mid-epoch step. The task supplies the math of
one replica; `TrainStep` the distributed step; this module runs it:

    restore model_dir's newest checkpoint, or start from --init_checkpoint
    until train_steps:
        run up to steps_per_loop steps in one tf.function call (the first loop
        of a process reports progress after its first step, which traces)
        log, write summaries; checkpoint / evaluate / profile on their steps
        stop cleanly on SIGTERM (after a checkpoint)
        roll back and stop after repeated non-finite steps
"""

import contextlib
import dataclasses
import hashlib
import logging
import os
import re
import time

import numpy as np
import tensorflow as tf
import yaml

from bert_tf import config as config_lib
from bert_tf import storage
from bert_tf.checkpoints import native, readable
from bert_tf.training import (
    cluster_shape,
    fixed_shapes,
    lost_workers,
    resolution,
    run_directory,
    strategies,
)
from bert_tf.training.checkpointing import NonFiniteWeightsError, TrainingCheckpoint
from bert_tf.training.heap_release import HeapRelease
from bert_tf.training.inference import inference_fn
from bert_tf.training.loss_scale import LossScale
from bert_tf.training.optimizers import build_optimizer
from bert_tf.training.precision import model_dtype
from bert_tf.training.preemption import preemption_handler
from bert_tf.training.progress import Progress
from bert_tf.training.run_lock import RunLock
from bert_tf.training.signals import StopOnSignal
from bert_tf.training.summaries import SummaryWriters, drop_events_after
from bert_tf.training.train_step import TrainStep


class TrainingDivergedError(RuntimeError):
    """Repeated non-finite steps: the run was rolled back and stopped."""


class InputReadError(RuntimeError):
    """A training or evaluation file could not be read; the run stopped, its checkpoints kept.

    `file` is the file the error names, when it names one.
    """

    def __init__(self, message, file=None):
        super().__init__(message)
        self.file = file


class _ErrorInInputState(Exception):
    """The restored input state replays a read error of a file that reads now: start again."""


# TensorFlow's file errors name the file first: "<path>; No such file or directory".
_FILE_IN_MESSAGE = re.compile(r"(\S+?)[;:] (No such file or directory|Permission denied|"
                              r"Is a directory|Not a directory)")
# Errors of reading data (as opposed to, say, running out of memory).
_READ_ERRORS = (tf.errors.NotFoundError, tf.errors.PermissionDeniedError,
                tf.errors.DataLossError)


def describe_read_error(error):
    """`(file or None, "<file>: <reason>")` of an input pipeline's error; None if no read error.

    Args:
      error: an `OSError` or a `tf.errors.OpError` raised while reading data.
    """
    if isinstance(error, OSError):
        reason = error.strerror or str(error)
        if error.filename:
            return error.filename, f"{error.filename}: {reason}"
        return None, reason
    message = getattr(error, "message", str(error))
    found = _FILE_IN_MESSAGE.search(message)
    if found:
        return found.group(1), f"{found.group(1)}: {found.group(2)}"
    # The TFRecord reader's count check (`records._checked_file_records`) names the file.
    found = re.search(r"assertion failed: ((?:\[[^\]]*\] ?)+)", message)
    if found and "Corrupt TFRecord file" in found.group(1):
        return None, " ".join(re.findall(r"\[([^\]]*)\]", found.group(1)))
    if isinstance(error, _READ_ERRORS):
        lines = [line for line in message.strip().splitlines() if line.strip()]
        return None, lines[0] if lines else type(error).__name__
    return None


def _reads_now(path):
    try:
        with storage.open(path, "rb") as f:
            f.read(1)
    except OSError:
        return False
    return storage.isfile(path)


@dataclasses.dataclass
class TrainingResult:
    """How a `Trainer.train` call ended."""

    step: int
    train_metrics: dict
    eval_metrics: dict
    # SHA-256 of the trainable weights: equal on every worker of a run.
    weights_fingerprint: str = ""
    stopped_by_signal: bool = False
    # The run had reached train_steps before this call: nothing was trained.
    already_complete: bool = False


def weights_fingerprint(variables):
    """SHA-256 over the bytes of `variables`, in order."""
    digest = hashlib.sha256()
    for variable in variables:
        digest.update(np.ascontiguousarray(variable.numpy()).tobytes())
    return digest.hexdigest()


class Trainer:
    """Trains `task`'s model as `experiment` describes, in `model_dir`.

    Args:
      task: a `bert_tf.tasks.base.Task`; the trainer uses nothing else of it.
      experiment: the task's experiment as loaded; resolved first
        (`resolution.resolve_run`), after which `self.experiment` is
        `task.experiment`, the run's final experiment.
      model_dir: checkpoints, `params.yaml`, `bert_tf_model.json` and the
        TensorBoard logs (`train/`, `eval/`) go here.
      strategy: a `tf.distribute.Strategy` (see `strategies.create_strategy`).
      init_checkpoint: weights to start from when `model_dir` has no checkpoint.
      stream: where the progress bar goes (default stdout).
      allow_data_change: resume although the training data or batching
        settings differ from the run's `params.yaml`.
    """

    def __init__(self, task, experiment, model_dir, strategy, init_checkpoint=None, stream=None,
                 allow_data_change=False):
        self.task = task
        self.model_dir = model_dir
        self.strategy = strategy
        self.init_checkpoint = init_checkpoint
        self.stream = stream
        self.chief = strategies.is_chief(strategy)
        self.multi_worker = isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
        # The policy of the run this one may resume (read before params.yaml is rewritten):
        # a run that moves into float16 starts its loss scale over.
        self._previous_precision = run_directory.recorded_precision(model_dir)
        self.experiment = resolution.resolve_run(task, experiment, strategy, model_dir,
                                                 init_checkpoint, allow_data_change)
        self.config = self.experiment.trainer
        self._predict = None
        # Taken before anything is written into model_dir; only the chief writes it.
        self._lock = RunLock(model_dir) if self.chief else None
        try:
            self._build()
        except BaseException:
            self.release()
            raise

    def release(self):
        """Releases `model_dir` for other trainers (`train` does it when it ends)."""
        if self._lock is not None:
            self._lock.release()

    # -- setup ---------------------------------------------------------------

    def _build(self):
        runtime, config = self.experiment.runtime, self.config
        # Before anything is built: a batch this cluster cannot split is one error line.
        shape = cluster_shape.ClusterShape.of(self.strategy, config.global_batch_size,
                                              config.input_distribution)
        cluster_shape.check_trainable(shape, config.gradient_accumulation_steps,
                                      *cluster_shape.newest_saved_shape(self.model_dir))
        policy = runtime.mixed_precision
        logging.info("building the %s model (%s) and its input pipeline", self.task.name, policy)
        with self.strategy.scope():
            self.model = self.task.build_model(dtype=model_dtype(policy))
            self.optimizer = build_optimizer(self.experiment.optimizer, config.train_steps)
            self.optimizer.build(self.model.trainable_variables)
            counter = dict(dtype=tf.int64, trainable=False,
                           aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
            self.step = tf.Variable(0, name="global_step", **counter)
            self.consecutive_nonfinite = tf.Variable(0, name="consecutive_nonfinite", **counter)
            self.stop_requested = tf.Variable(False, trainable=False, name="stop_requested",
                                              aggregation=counter["aggregation"])
            self.loss_scale = LossScale(enabled=policy == "mixed_float16")
        jit_compile = runtime.jit_compile
        if jit_compile is None:
            jit_compile = strategies.default_jit_compile(self.strategy)
        self.train_step = TrainStep(
            self.strategy, self.task, self.model, self.optimizer, self.loss_scale,
            clip_norm=self.experiment.optimizer.clip_norm,
            accumulation_steps=config.gradient_accumulation_steps, jit_compile=jit_compile,
            step=self.step, consecutive_nonfinite=self.consecutive_nonfinite,
            stop_requested=self.stop_requested,
            global_batches=config.input_distribution == "global")
        batch = config.global_batch_size
        self.iterator = self._input_iterator(
            lambda context: self.task.train_dataset(context, batch))
        if isinstance(self.strategy, tf.distribute.TPUStrategy):
            fixed_shapes.check_fixed_shapes(self.iterator.element_spec,
                                            self.task.fixed_shape_settings())
        self._eval_iterator = None
        self.checkpoint = TrainingCheckpoint(
            self.model_dir, model=self.model, optimizer=self.optimizer, step=self.step,
            loss_scale=self.loss_scale, iterator=self.iterator, max_to_keep=config.max_to_keep,
            shape=shape, chief=self.chief, worker_index=strategies.worker_id(self.strategy),
            per_worker_input=self.multi_worker)

    def _input_iterator(self, dataset_fn):
        """A plain tf.data iterator over this worker's batches (see `input_distribution`).

        Plain iterators are checkpointable on every strategy (TensorFlow's
        multi-device distributed iterators are not); `TrainStep` hands their
        batches to the replicas.
        """
        if self.config.input_distribution == "global":
            return iter(dataset_fn(None))
        local_replicas = strategies.local_replica_count(self.strategy)
        context = tf.distribute.InputContext(
            num_input_pipelines=self.strategy.num_replicas_in_sync // local_replicas,
            input_pipeline_id=strategies.worker_id(self.strategy),
            num_replicas_in_sync=self.strategy.num_replicas_in_sync)
        return iter(dataset_fn(context))

    def _restore_or_initialize(self):
        restored = self._restored_from = self.checkpoint.restore_latest()
        if restored:
            logging.info("resumed from %s (step %d)", restored, int(self.step.numpy()))
            if self.init_checkpoint:
                logging.info("--init_checkpoint %s ignored: %s already has a checkpoint",
                             self.init_checkpoint, self.model_dir)
            if self.chief:
                drop_events_after(self.model_dir, int(self.step.numpy()))
            if self.loss_scale.enabled and self._previous_precision not in (None, "mixed_float16"):
                # The checkpoint holds the unused scale of a run that did not scale its loss.
                logging.info("the run was %s until now: the float16 loss scale starts over",
                             self._previous_precision)
                self.loss_scale.reset()
        elif self.chief:
            # Events of an earlier attempt that died before its first checkpoint.
            drop_events_after(self.model_dir, -1)
        if not restored and self.init_checkpoint:
            loaded, fresh = self.task.initialize(self.model, self.init_checkpoint)
            logging.info("initialised %d weights from %s%s", len(loaded), self.init_checkpoint,
                         f"; fresh: {fresh}" if fresh else "")
        return restored

    def _write_run_files(self):
        if not self.chief:
            return
        run_directory.write_params(self.model_dir, self.experiment)
        native.write_metadata(self.model, self.model_dir, self.task.tokenizer_contract(),
                              self.task.vocab_file, record=self.task.task_record())

    # -- the loop --------------------------------------------------------------

    def _next_boundary(self, step):
        config = self.config
        boundary = min(step + config.steps_per_loop, config.train_steps)
        for every in (config.checkpoint_every, config.eval_every):
            if every:
                boundary = min(boundary, (step // every + 1) * every)
        for profile_step in config.profile_steps:
            if profile_step > step:
                boundary = min(boundary, profile_step)
        return boundary

    def _train_metrics(self, sums, num_steps, seconds, untimed=None):
        """The metrics of a loop's `num_steps` steps from their `sums`.

        `seconds` times them all, or all but the first when `untimed` holds
        that step's sums (the traced first step, left out of the throughput).
        """
        metrics = self.task.metrics(sums)
        finite_steps = float(sums["finite_steps"])
        timed, timed_steps = sums, num_steps
        if untimed is not None:
            timed = {key: sums[key] - untimed[key] for key in sums}
            timed_steps -= 1
        metrics.update({
            "learning_rate": float(self.optimizer.learning_rate.numpy()),
            "gradient_norm": float(sums["gradient_norm"]) / max(finite_steps, 1.0),
            "loss_scale": float(self.loss_scale.scale.numpy()),
            "skipped_steps": num_steps - finite_steps,
            # Packed rows hold several examples: the task counts them.
            "examples_per_second": float(timed["examples"]) / seconds,
            "tokens_per_second": float(timed["tokens"]) / seconds,
            "steps_per_second": timed_steps / seconds,
        })
        return metrics

    def _eval_batches(self):
        """A persistent iterator over the same `eval_steps` held-out batches, cached.

        The first evaluation computes the batches; `repeat` then replays them
        from the cache, so every evaluation sees exactly the same examples
        and costs no input-pipeline work after the first.
        """
        if self._eval_iterator is None:
            batch = self.config.eval_batch_size or self.config.global_batch_size
            steps = self.config.eval_steps

            def dataset_fn(context):
                # One batch per replica of this worker per step, or one global batch.
                per_step = strategies.local_replica_count(self.strategy) if context else 1
                dataset = self.task.eval_dataset(context, batch)
                return dataset.take(steps * per_step).cache().repeat()

            self._eval_iterator = self._input_iterator(dataset_fn)
        return self._eval_iterator

    def evaluate(self, writers=None):
        """Evaluation metrics, logged and written to TensorBoard's `eval/`.

        Tasks with host evaluation (`supports_evaluation`: fine-tuning) run
        every evaluation example through the model on this host and compute
        their official metric; tasks with held-out batches (`has_eval_data`:
        pretraining) sum in-graph metrics over `eval_steps` of them (the
        same batches every time).
        """
        if self.task.supports_evaluation:
            batch = self.config.eval_batch_size or self.config.global_batch_size
            if self._predict is None:
                self._predict = inference_fn(self.model)
            metrics = self.task.evaluate_model(self._predict, batch_size=batch)
        elif self.task.has_eval_data:
            sums = self.train_step.eval_loop(self._eval_batches(),
                                             tf.constant(self.config.eval_steps))
            metrics = self.task.metrics({k: v.numpy() for k, v in sums.items()})
        else:
            return {}
        step = int(self.step.numpy())
        logging.info("eval at step %d: %s", step,
                     "  ".join(f"{k} {v:.4f}" for k, v in sorted(metrics.items())))
        if writers is not None:
            writers.scalars(writers.eval, step, metrics)
        return metrics

    @contextlib.contextmanager
    def _stop_on_read_error(self, what):
        """Turns an unreadable input file into one `InputReadError` line naming it."""
        try:
            yield
        except (OSError, tf.errors.OpError) as error:
            described = describe_read_error(error)
            if described is None:
                raise
            file, described = described
            logging.debug("reading the %s data failed", what, exc_info=True)
            latest = self.checkpoint.latest
            kept = (f"the last checkpoint ({os.path.basename(latest)}) is kept" if latest
                    else "no checkpoint was written yet")
            raise InputReadError(
                f"cannot read the {what} data: {described}; the run stopped and {kept}: "
                "repair the file and run the same command to resume", file) from None

    def _evaluate_at(self, step, writers):
        """Evaluates at `step` (its checkpoint already written) and records the result."""
        with self._stop_on_read_error("evaluation"):
            metrics = self.evaluate(writers)
        self._write_eval_results(step, metrics)
        return metrics

    def _write_eval_results(self, step, metrics):
        """`model_dir/eval_results.json`: the newest evaluation (what sweeps compare)."""
        if self.chief and metrics:
            run_directory.write_eval_results(self.model_dir, step, metrics)

    def _roll_back(self, reason):
        latest = self.checkpoint.restore_latest()
        where = (f"rolled back to {latest} (step {int(self.step.numpy())})" if latest
                 else "no checkpoint was written")
        raise TrainingDivergedError(
            f"{reason}; {where} and stopped. Lower optimizer.learning_rate, enable "
            "gradient clipping (optimizer.clip_norm) or check the data.")

    def train(self):
        """Trains to `trainer.train_steps`; returns a `TrainingResult`."""
        try:
            while True:
                try:
                    return self._train()
                except _ErrorInInputState:
                    continue  # from the next older checkpoint
                except tf.errors.OpError as error:
                    lost = self._lost_worker(error)
                    if lost is None:
                        raise
                    raise lost from error
        finally:
            self.release()

    def _lost_worker(self, error):
        """A `LostWorkerError` when `error` says a worker of the cluster is gone, else None."""
        return lost_workers.lost_worker_error(error, self.strategy, self.checkpoint.latest)

    def _check_input_state(self, error):
        """Raises `_ErrorInInputState` when the newest checkpoint replays `error`.

        tf.data saves the elements its buffers hold, a read error included:
        a checkpoint written after a file went missing, but before the error
        reached the train step, fails again once restored, although the file
        is back. The checkpoint this run restored and those it wrote since are
        set aside and the run starts over from the one before them (repeatedly,
        until one reads the file afresh: each round sets aside an older one).
        """
        restored = self._restored_from
        if not (restored and error.file and _reads_now(error.file) and self.chief
                and not self.multi_worker):
            return
        if self.checkpoint.resume_plan.input_from_worker is None:
            return  # the input position was re-derived, not restored: nothing replays
        listed = readable.listed_checkpoints(self.model_dir)
        replaying = listed[:listed.index(restored) + 1] if restored in listed else listed[:1]
        for prefix in replaying:
            logging.warning("%s holds the input pipeline's error from when %s could not be "
                            "read; set aside as %s", os.path.basename(prefix), error.file,
                            self.checkpoint.set_aside(prefix))
        if not readable.listed_checkpoints(self.model_dir):
            raise InputReadError(
                f"every checkpoint of {self.model_dir} held the input pipeline's error from "
                f"when {error.file} could not be read (set aside as ckpt-N.damaged); run the "
                "same command to start the run over", error.file) from None
        raise _ErrorInInputState()

    def _missed_evaluation(self, step):
        """True when the run stopped in the evaluation of `step`, after checkpointing it."""
        config = self.config
        at_eval_step = step == config.train_steps or (config.eval_every
                                                       and step % config.eval_every == 0)
        evaluates = self.task.supports_evaluation or self.task.has_eval_data
        # Workers of a multi-worker run need not see the chief's eval_results.json, and
        # must all evaluate or none.
        return bool(step and at_eval_step and evaluates and not self.multi_worker
                    and run_directory.last_evaluation(self.model_dir)[0] != step)

    def _train(self):
        config = self.config
        self._restore_or_initialize()
        if int(self.step.numpy()) >= config.train_steps:
            if self._missed_evaluation(int(self.step.numpy())):
                writers = SummaryWriters(self.model_dir, self.chief)
                try:
                    self._evaluate_at(int(self.step.numpy()), writers)
                finally:
                    writers.close()
            _, metrics = run_directory.last_evaluation(self.model_dir)
            return TrainingResult(int(self.step.numpy()), {}, metrics, self._fingerprint(),
                                  already_complete=True)
        self._write_run_files()
        writers = SummaryWriters(self.model_dir, self.chief)
        step = int(self.step.numpy())
        if step == 0:
            writers.config_text(0, yaml.safe_dump(config_lib.to_dict(self.experiment),
                                                  sort_keys=False))
        if self._missed_evaluation(step):
            self._evaluate_at(step, writers)
        progress = Progress(step, config.train_steps, self.stream)
        preemption = preemption_handler(self.strategy, self.checkpoint, self.step)
        # Under TensorFlow's preemption handling that handler owns SIGTERM; this one then
        # only bounds the wait for a step boundary.
        signals = StopOnSignal(None if preemption else self.stop_requested,
                               latest_checkpoint=lambda: self.checkpoint.manager.latest_checkpoint)
        train_metrics, eval_metrics = {}, {}
        # Freed heap memory goes back to the OS each loop (at most every 10 s) and
        # after each checkpoint and evaluation: see `heap_release`.
        release_heap = HeapRelease()
        profiling = False
        first_loop, reported, first_evaluation = True, None, True
        try:
            while step < config.train_steps:
                boundary = self._next_boundary(step)
                if config.profile_steps and step == config.profile_steps[0] and self.chief:
                    tf.profiler.experimental.start(writers.train_dir)
                    profiling = True
                start = time.monotonic()
                untimed = None
                if first_loop:
                    first_loop, reported = False, step + 1
                    sums, untimed, start = self._first_loop(step, boundary, progress,
                                                            preemption, signals)
                else:
                    sums = self._run_steps(boundary - step, preemption, signals)
                seconds = max(time.monotonic() - start, 1e-9)
                # Fewer than planned when a stop was requested inside the loop.
                num_steps, step = int(self.step.numpy()) - step, int(self.step.numpy())
                if profiling and step >= config.profile_steps[1]:
                    tf.profiler.experimental.stop()
                    profiling = False
                train_metrics = self._train_metrics(sums, num_steps, seconds, untimed)
                writers.scalars(writers.train, step, train_metrics)
                if step != reported:  # a one-step first loop was reported already
                    progress.update(step, train_metrics, train_metrics["examples_per_second"])

                failures = int(self.consecutive_nonfinite.numpy())
                if failures >= config.max_consecutive_nonfinite:
                    self._roll_back(f"{failures} consecutive steps up to step {step} had a "
                                    "non-finite loss or gradients (their updates were skipped)")
                stop = bool(self.stop_requested.numpy())
                at_eval_step = config.eval_every and step % config.eval_every == 0
                # An evaluation that fails must not cost the steps before it.
                at_eval_step = at_eval_step or step == config.train_steps
                if step % config.checkpoint_every == 0 or at_eval_step or stop:
                    if failures:
                        # The newest step was skipped as non-finite: these weights
                        # are not known to be good, so keep the last checkpoint.
                        logging.warning("not checkpointing step %d: the last %d step(s) had "
                                        "a non-finite loss or gradients", step, failures)
                    else:
                        try:
                            self.checkpoint.save()
                        except NonFiniteWeightsError as e:
                            self._roll_back(str(e))
                if at_eval_step:
                    if first_evaluation and (self.task.supports_evaluation
                                             or self.task.has_eval_data):
                        first_evaluation = False
                        logging.info("step %d: evaluating (the first evaluation traces the "
                                     "model's evaluation step)", step)
                    eval_metrics = self._evaluate_at(step, writers) or eval_metrics
                release_heap(force=at_eval_step or step % config.checkpoint_every == 0)
                if preemption:
                    preemption.save_checkpoint_if_preempted(checkpoint_number=step)
                if stop:
                    logging.warning("stopped by %s at step %d after saving; run the same "
                                    "command to resume", signals.received or "SIGTERM", step)
                    return TrainingResult(step, train_metrics, eval_metrics,
                                          self._fingerprint(), stopped_by_signal=True)
        finally:
            progress.finish()
            if profiling:
                tf.profiler.experimental.stop()
            signals.close()
            writers.close()
        return TrainingResult(step, train_metrics, eval_metrics, self._fingerprint())

    def _run_steps(self, num_steps, preemption, signals):
        """Runs `num_steps` steps in one `train_loop` call; returns the metric sums as numpy.

        The loop is under the signal deadline (`StopOnSignal`) while it runs."""
        watch = preemption.watch_preemption_scope() if preemption else contextlib.nullcontext()
        step, start = int(self.step.numpy()), time.monotonic()
        signals.loop_started(num_steps)
        try:
            with watch, self._stop_on_read_error("training"):
                sums = self.train_step.train_loop(self.iterator, tf.constant(num_steps))
        except InputReadError as error:
            self._check_input_state(error)
            raise
        sums = {key: value.numpy() for key, value in sums.items()}
        signals.loop_finished(int(self.step.numpy()) - step, time.monotonic() - start)
        return sums

    def _first_loop(self, step, boundary, progress, preemption, signals):
        """Runs the first loop of this process, from `step` to `boundary`.

        Its first step traces the train step and fills the input pipeline,
        which takes long; progress is reported right after it, and the rest
        of the loop then runs to the same boundary as before, so checkpoints,
        evaluations and summaries fall on the same steps. Splitting a loop
        changes no result: every step runs the same traced loop body.

        Returns:
          (the loop's metric sums, the first step's sums when more steps
          followed it or None, the time the steps after it started).
        """
        logging.info("step %d: tracing the training step and filling the input pipeline "
                     "(once per process; progress follows this step)", step + 1)
        first_start = time.monotonic()
        sums = self._run_steps(1, preemption, signals)
        progress.update(step + 1, self.task.metrics(sums),
                        first_step_seconds=time.monotonic() - first_start)
        stop = bool(self.stop_requested.numpy())
        if boundary - step == 1 or stop:
            return sums, None, first_start
        rest_start = time.monotonic()
        rest = self._run_steps(boundary - step - 1, preemption, signals)
        return {key: sums[key] + rest[key] for key in sums}, sums, rest_start

    def _fingerprint(self):
        return weights_fingerprint(self.model.trainable_variables)
