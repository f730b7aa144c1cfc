"""The trainer: builds a run's model, optimizer, input and checkpoint, and runs its loop.

A custom loop rather than `Model.fit`: Keras 3's `fit` fails under
`MultiWorkerMirroredStrategy`, and its `BackupAndRestore` restores neither
the input position nor the mid-epoch step. The task supplies the math of
one replica; `TrainStep` the distributed step; this module runs it:

    resolve the experiment (`resolution`), then build the run's pieces (`_build`)
    restore model_dir's newest checkpoint, or start from --init_checkpoint
    a run complete already: only its missed final evaluation (`_complete_run`)
    record the run's files, run the evaluation it missed (`_catch_up`)
    until train_steps, loop by loop (`_run_loops`):
        run up to steps_per_loop steps in one tf.function call (`_run_loop`; the first
        loop of a process reports progress after its first step, which traces)
        at the loop's end (`_at_boundary`): roll back and stop after repeated non-finite
        steps; checkpoint and evaluate on their steps; stop cleanly on SIGTERM
"""

import contextlib
import logging
import time

import tensorflow as tf
import yaml

from bert_tf import config as config_lib
from bert_tf.checkpoints import native
from bert_tf.training import (
    cluster_shape,
    fixed_shapes,
    input_faults,
    lost_workers,
    resolution,
    run_directory,
    strategies,
)
from bert_tf.training.checkpointing import TrainingCheckpoint
from bert_tf.training.divergence import DivergenceGuard
from bert_tf.training.evaluation import Evaluator
from bert_tf.training.loop_metrics import loop_metrics
from bert_tf.training.loop_schedule import LoopSchedule
from bert_tf.training.loop_state import LoopState
from bert_tf.training.loss_scale import LossScale
from bert_tf.training.optimizers import build_optimizer
from bert_tf.training.precision import model_dtype
from bert_tf.training.preemption import preemption_handler
from bert_tf.training.profiler import ProfilerRange
from bert_tf.training.progress import Progress
from bert_tf.training.run_lock import RunLock
from bert_tf.training.signals import StopOnSignal
from bert_tf.training.summaries import SummaryWriters, drop_events_after
from bert_tf.training.train_step import TrainStep
from bert_tf.training.training_result import TrainingResult, weights_fingerprint


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
      plan: when this training is one phase of several, the run's phases and
        which one this is (`progress.RunPlan`): the progress bar names the
        phase and estimates the whole run. None: a run of one training.
    """

    def __init__(self, task, experiment, model_dir, strategy, init_checkpoint=None, stream=None,
                 allow_data_change=False, plan=None):
        self.task = task
        self.model_dir = model_dir
        self.strategy = strategy
        self.init_checkpoint = init_checkpoint
        self.stream = stream
        self.plan = plan
        self.chief = strategies.is_chief(strategy)
        self.multi_worker = isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
        # The policy of the run this one may resume (read before params.yaml is rewritten):
        # a run that moves into float16 starts its loss scale over.
        self._previous_precision = run_directory.recorded_precision(model_dir)
        self.experiment = resolution.resolve_run(task, experiment, strategy, model_dir,
                                                 init_checkpoint, allow_data_change)
        self.config = self.experiment.trainer
        self.schedule = LoopSchedule(self.config)
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
        config = self.config
        # Before anything is built: a batch this cluster cannot split is one error line.
        shape = cluster_shape.ClusterShape.of(self.strategy, config.global_batch_size,
                                              config.input_distribution)
        cluster_shape.check_trainable(shape, config.gradient_accumulation_steps,
                                      *cluster_shape.newest_saved_shape(self.model_dir))
        self._build_variables()
        jit_compile = self.experiment.runtime.jit_compile
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
        with input_faults.stop_on_read_error(
                "training", lambda: tf.train.latest_checkpoint(self.model_dir),
                catch=input_faults.BUILD_ERRORS):
            self.iterator = self._input_iterator(
                lambda context: self.task.train_dataset(context, batch))
        if isinstance(self.strategy, tf.distribute.TPUStrategy):
            fixed_shapes.check_fixed_shapes(self.iterator.element_spec,
                                            self.task.fixed_shape_settings())
        self.evaluator = Evaluator(self.task, self.model, self.train_step, self.strategy,
                                   config, self._input_iterator)
        self.checkpoint = TrainingCheckpoint(
            self.model_dir, model=self.model, optimizer=self.optimizer, step=self.step,
            loss_scale=self.loss_scale, iterator=self.iterator, max_to_keep=config.max_to_keep,
            shape=shape, chief=self.chief, worker_index=strategies.worker_id(self.strategy),
            per_worker_input=self.multi_worker)
        self.divergence = DivergenceGuard(self.checkpoint, self.step,
                                          self.consecutive_nonfinite,
                                          config.max_consecutive_nonfinite)

    def _build_variables(self):
        """The model, its optimizer and the loop's counters, under the strategy's scope."""
        policy = self.experiment.runtime.mixed_precision
        logging.info("building the %s model (%s) and its input pipeline", self.task.name, policy)
        with self.strategy.scope():
            self.model = self.task.build_model(dtype=model_dtype(policy))
            self.optimizer = build_optimizer(self.experiment.optimizer, self.config.train_steps)
            self.optimizer.build(self.model.trainable_variables)
            counter = dict(dtype=tf.int64, trainable=False,
                           aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
            self.step = tf.Variable(0, name="global_step", **counter)
            self.consecutive_nonfinite = tf.Variable(0, name="consecutive_nonfinite", **counter)
            self.stop_requested = tf.Variable(False, trainable=False, name="stop_requested",
                                              aggregation=counter["aggregation"])
            self.loss_scale = LossScale(enabled=policy == "mixed_float16")

    def _input_iterator(self, dataset_fn):
        """A plain tf.data iterator over this worker's batches (`strategies.worker_iterator`)."""
        return strategies.worker_iterator(self.strategy, self.config.input_distribution,
                                          dataset_fn)

    def _restore_or_initialize(self):
        restored = self.checkpoint.restore_latest()
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

    # -- training, evaluation and their faults ---------------------------------

    def evaluate(self, writers=None):
        """The current step's evaluation metrics (`Evaluator`; {} for a task without)."""
        return self.evaluator(int(self.step.numpy()), writers)

    def _evaluate_at(self, step, writers):
        """Evaluates at `step` (its checkpoint already written) and records the result."""
        with input_faults.stop_on_read_error("evaluation", lambda: self.checkpoint.latest):
            metrics = self.evaluate(writers)
        self._write_eval_results(step, metrics)
        return metrics

    def _write_eval_results(self, step, metrics):
        """`model_dir/eval_results.json`: the newest evaluation (what sweeps compare)."""
        if self.chief and metrics:
            run_directory.write_eval_results(self.model_dir, step, metrics)

    def train(self):
        """Trains to `trainer.train_steps`; returns a `TrainingResult`."""
        try:
            while True:
                try:
                    return self._train()
                except input_faults.ReplayedInputError:
                    continue  # the same checkpoint, its input position re-derived
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


    def _missed_evaluation(self, step):
        """True when the run stopped in the evaluation of `step`, after checkpointing it."""
        # Workers of a multi-worker run need not see the chief's eval_results.json, and
        # must all evaluate or none.
        return bool(step and self.schedule.evaluates_at(step) and self.evaluator.evaluates
                    and not self.multi_worker
                    and run_directory.last_evaluation(self.model_dir)[0] != step)

    # -- the phases of `_train` -----------------------------------------------

    def _train(self):
        """One attempt at `train`: restore, record the run, then loop to `train_steps`."""
        self._restore_or_initialize()
        if int(self.step.numpy()) >= self.config.train_steps:
            return self._complete_run()
        self._write_run_files()
        writers = SummaryWriters(self.model_dir, self.chief)
        self._catch_up(writers)
        loop = self._open_loop(writers)
        try:
            return self._run_loops(loop)
        finally:
            loop.close()

    def _complete_run(self):
        """The result of a run restored at `train_steps`: nothing to train.

        Its final evaluation runs first if the run stopped in it.
        """
        step = int(self.step.numpy())
        if self._missed_evaluation(step):
            writers = SummaryWriters(self.model_dir, self.chief)
            try:
                self._evaluate_at(step, writers)
            finally:
                writers.close()
        _, metrics = run_directory.last_evaluation(self.model_dir)
        return TrainingResult(step, {}, metrics, self._fingerprint(), already_complete=True)

    def _catch_up(self, writers):
        """Shows a new run's config in TensorBoard; runs the evaluation a stopped run missed."""
        step = int(self.step.numpy())
        if step == 0:
            writers.config_text(0, yaml.safe_dump(config_lib.to_dict(self.experiment),
                                                  sort_keys=False))
        if self._missed_evaluation(step):
            self._evaluate_at(step, writers)

    def _open_loop(self, writers):
        """The `LoopState` of this call: progress, signal watch, preemption, profiler."""
        progress = Progress(int(self.step.numpy()), self.config.train_steps, self.stream,
                            plan=self.plan)
        handler = preemption_handler(self.strategy, self.checkpoint, self.step)
        # Under TensorFlow's preemption handling that handler owns SIGTERM; this one then
        # only bounds the wait for a step boundary. A TPU's step counter reads only once
        # the running loop returns.
        tpu = isinstance(self.strategy, tf.distribute.TPUStrategy)
        signals = StopOnSignal(None if handler else self.stop_requested,
                               latest_checkpoint=lambda: self.checkpoint.latest_saved,
                               progress=None if tpu else lambda: int(self.step.numpy()))
        profiler = ProfilerRange(self.config.profile_steps, writers.train_dir, self.chief)
        return LoopState(writers, progress, signals, handler, profiler)

    def _run_loops(self, loop):
        """Trains loop by loop to `train_steps`, or until a signal stops the run."""
        step = int(self.step.numpy())
        while step < self.config.train_steps:
            step = self._run_loop(step, loop)
            if self._at_boundary(step, loop):
                logging.warning("stopped by %s at step %d after saving; run the same "
                                "command to resume", loop.signals.received or "SIGTERM", step)
                return TrainingResult(step, loop.train_metrics, loop.eval_metrics,
                                      self._fingerprint(), stopped_by_signal=True)
        return TrainingResult(step, loop.train_metrics, loop.eval_metrics, self._fingerprint())

    def _run_loop(self, step, loop):
        """Runs the loop after `step`, logs and records its metrics; returns the step reached."""
        boundary = self.schedule.next_boundary(step)
        loop.profiler.loop_starts(step)
        start = time.monotonic()
        untimed = None
        if loop.first_loop:
            loop.first_loop, loop.reported_step = False, step + 1
            sums, untimed, start = self._first_loop(step, boundary, loop.progress,
                                                    loop.preemption, loop.signals)
        else:
            sums = self._run_steps(boundary - step, loop.preemption, loop.signals)
        seconds = max(time.monotonic() - start, 1e-9)
        # Fewer than planned when a stop was requested inside the loop.
        num_steps, step = int(self.step.numpy()) - step, int(self.step.numpy())
        loop.profiler.loop_ended(step)
        loop.train_metrics = loop_metrics(
            self.task.metrics(sums), sums, num_steps, seconds,
            float(self.optimizer.learning_rate.numpy()), float(self.loss_scale.scale.numpy()),
            untimed)
        loop.writers.scalars(loop.writers.train, step, loop.train_metrics)
        if step != loop.reported_step:  # a one-step first loop was reported already
            loop.progress.update(step, loop.train_metrics,
                                 loop.train_metrics["examples_per_second"])
        return step

    def _at_boundary(self, step, loop):
        """Checkpoints and evaluates as `step` asks; returns whether a signal stops the run."""
        failures = self.divergence.check(step)
        stop = bool(self.stop_requested.numpy())
        evaluates = self.schedule.evaluates_at(step)
        if self.schedule.checkpoints_at(step) or evaluates or stop:
            self.divergence.save(step, failures)
        if evaluates:
            self._evaluate_in_loop(step, loop)
        # Freed heap memory goes back to the OS each loop (at most every 10 s) and
        # after each checkpoint and evaluation: see `heap_release`.
        loop.release_heap(force=evaluates or self.schedule.checkpoints_at(step))
        if loop.preemption:
            loop.preemption.save_checkpoint_if_preempted(checkpoint_number=step)
        return stop

    def _evaluate_in_loop(self, step, loop):
        if not loop.evaluated and self.evaluator.evaluates:
            loop.evaluated = True
            logging.info("step %d: evaluating (the first evaluation traces the model's "
                         "evaluation step)", step)
        loop.eval_metrics = self._evaluate_at(step, loop.writers) or loop.eval_metrics

    def _run_steps(self, num_steps, preemption, signals):
        """Runs `num_steps` steps in one `train_loop` call; returns the metric sums as numpy.

        The loop is under the signal deadline (`StopOnSignal`) while it runs."""
        watch = preemption.watch_preemption_scope() if preemption else contextlib.nullcontext()
        step, start = int(self.step.numpy()), time.monotonic()
        signals.loop_started(num_steps)
        try:
            with watch, input_faults.stop_on_read_error("training",
                                                        lambda: self.checkpoint.latest):
                sums = self.train_step.train_loop(self.iterator, tf.constant(num_steps))
        except input_faults.InputReadError as error:
            input_faults.check_replayed(error, self.checkpoint, chief=self.chief,
                                        multi_worker=self.multi_worker)
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
