"""The trainer's evaluation of the task's model: on the host, or over held-out batches.

Tasks with host evaluation (`supports_evaluation`: fine-tuning) run every
evaluation example through the model on this host and compute their
official metric; tasks with held-out batches (`has_eval_data`: pretraining)
sum in-graph metrics over `eval_steps` of them, the same batches every time.
"""

import logging

import tensorflow as tf

from bert_tf.training import strategies
from bert_tf.training.inference import inference_fn


class Evaluator:
    """Evaluates `task`'s `model` as the run's `TrainerConfig` says.

    Args:
      task: the run's `Task`.
      model: its model.
      train_step: the run's `TrainStep` (its `eval_loop` sums held-out batches).
      strategy: the run's strategy.
      config: the run's `TrainerConfig` (`eval_steps`, `eval_batch_size`).
      input_iterator: `dataset_fn -> iterator` over this worker's batches,
        `dataset_fn` taking an `InputContext` or None.
    """

    def __init__(self, task, model, train_step, strategy, config, input_iterator):
        self.task = task
        self.model = model
        self.train_step = train_step
        self.strategy = strategy
        self.config = config
        self._input_iterator = input_iterator
        self._predict = None
        self._held_out = None

    @property
    def evaluates(self) -> bool:
        """Whether the task evaluates at all (host evaluation or held-out batches)."""
        return self.task.supports_evaluation or self.task.has_eval_data

    def __call__(self, step: int, writers=None) -> dict:
        """The metrics at `step`, logged and written to TensorBoard's `eval/`; {} for none.

        Args:
          step: the step evaluated (for the log and the summaries).
          writers: the run's `SummaryWriters`, or None to write no summary.
        """
        batch = self.config.eval_batch_size or self.config.global_batch_size
        if self.task.supports_evaluation:
            if self._predict is None:
                self._predict = inference_fn(self.model)
            metrics = self.task.evaluate_model(self._predict, batch_size=batch)
        elif self.task.has_eval_data:
            sums = self.train_step.eval_loop(self._held_out_batches(batch),
                                             tf.constant(self.config.eval_steps))
            metrics = self.task.metrics({k: v.numpy() for k, v in sums.items()})
        else:
            return {}
        logging.info("eval at step %d: %s", step,
                     "  ".join(f"{k} {v:.4f}" for k, v in sorted(metrics.items())))
        if writers is not None:
            writers.scalars(writers.eval, step, metrics)
        return metrics

    def _held_out_batches(self, batch):
        """A persistent iterator over the same `eval_steps` held-out batches, cached.

        The first evaluation computes the batches; `repeat` then replays them
        from the cache, so every evaluation sees exactly the same examples
        and costs no input-pipeline work after the first.
        """
        if self._held_out is None:
            steps = self.config.eval_steps

            def dataset_fn(context):
                # One batch per replica of this worker per step, or one global batch.
                per_step = strategies.local_replica_count(self.strategy) if context else 1
                dataset = self.task.eval_dataset(context, batch)
                return dataset.take(steps * per_step).cache().repeat()

            self._held_out = self._input_iterator(dataset_fn)
        return self._held_out
