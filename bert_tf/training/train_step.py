"""The replica step and the inner loops shared by every task and strategy.

One replica step:
  1. sum the loss normalisers over replicas (the task's losses are global means);
  2. forward and backward (optionally over gradient-accumulation micro-batches,
     optionally XLA-compiled), on the loss scaled for `mixed_float16`;
  3. sum the gradients over replicas, unscale, take the global norm, clip;
  4. apply the update only when the loss and the gradients are finite,
     otherwise skip it (and halve the loss scale).

Step 3 happens here, not in the optimizer, because clipping by the global
norm and the finite check both need the summed gradients; the optimizers of
`optimizers.build_optimizer` therefore do not sum again.

`train_loop` runs `num_steps` such steps inside one `tf.function` (what TPUs
need) and returns the metric sums of the loop. Nothing string-typed enters
it: tokenization stays in the host input pipeline.
"""

import logging

import tensorflow as tf

from bert_tf.training import strategies

SUM = tf.distribute.ReduceOp.SUM


def _keep_accumulated_sums_as_adds():
    """Turns off Grappler's arithmetic optimizer for this process.

    With gradient accumulation inside a multi-step training loop, TF 2.20's
    arithmetic optimizer merges the micro-batch sum of a wide gradient (the
    30,522 x 256 word embeddings of BERT-mini are enough) into an accumulator
    whose temporary variable is created again, under the same name, by a
    later step of the loop: `AlreadyExistsError ... AddOpsRewrite_add_N/tmp_var`
    in the first loop of several steps. Without the rewrite the sums stay plain
    adds.
    The option is process-wide; the training process is the one that needs it.
    """
    tf.config.optimizer.set_experimental_options({"arithmetic_optimization": False})
    logging.info("gradient accumulation: Grappler's arithmetic optimizer is off for this "
                 "process (TF's rewrite of the accumulated sums fails in training loops)")


def _dense(gradient):
    # The word embeddings get IndexedSlices from their gather plus a dense
    # part from the tied MLM output layer; a dense sum is what they need.
    return tf.convert_to_tensor(gradient) if isinstance(gradient, tf.IndexedSlices) else gradient


def _sum_over_replicas(value):
    """The sum of `value` (a nest of dense tensors) over all replicas, in a replica context.

    `ReplicaContext.all_reduce` makes the sum differentiable with a
    `tf.custom_gradient`, which inside a `tf.function` registers a gradient
    function in TensorFlow's process-wide registry, never released: it kept
    the traced train and eval loops alive after their trainer was gone (about
    65 MB per in-process run). Nothing is differentiated through these sums,
    so they go to the strategy's batch reduction directly.
    """
    def reduce(strategy, *values):
        # Each value is also its destination: the sum lands on every replica.
        return strategy.extended.batch_reduce_to(SUM, [(v, v) for v in values])

    flat = tf.nest.flatten(value)
    summed = tf.distribute.get_replica_context().merge_call(reduce, args=flat)
    return tf.nest.pack_sequence_as(value, summed)


def _split_batch(structure, parts):
    """Splits every tensor's batch dimension into `parts`: [B, ...] -> [parts, B/parts, ...]."""
    def split(x):
        shape = tf.shape(x)
        return tf.reshape(x, tf.concat([[parts, shape[0] // parts], shape[1:]], 0))
    return tf.nest.map_structure(split, structure)


class TrainStep:
    """Builds the distributed train and eval loops for a task's model.

    Args:
      strategy: the run's `tf.distribute.Strategy`.
      task: supplies `loss_denominators`, `compute_loss`, `metric_sums`.
      model: the Keras model, built under `strategy.scope()`.
      optimizer: from `optimizers.build_optimizer`, built on the model's
        trainable variables.
      loss_scale: a `loss_scale.LossScale`.
      clip_norm: global-norm clipping of the summed gradients (0: none).
      accumulation_steps: micro-batches per update.
      jit_compile: XLA-compile the forward/backward pass.
      step: int64 variable counting global steps (created under the scope).
      consecutive_nonfinite: int64 variable counting skipped steps in a row.
      stop_requested: optional bool variable; when it turns True the train
        loop ends before its next step (SIGTERM).
      global_batches: the input iterator yields whole global batches (split
        here across replicas) instead of one batch per local replica.
    """

    def __init__(self, strategy, task, model, optimizer, loss_scale, *, clip_norm,
                 accumulation_steps, jit_compile, step, consecutive_nonfinite,
                 stop_requested=None, global_batches=False):
        self.strategy = strategy
        self.task = task
        self.model = model
        self.optimizer = optimizer
        self.loss_scale = loss_scale
        self.clip_norm = clip_norm
        self.accumulation_steps = accumulation_steps
        if accumulation_steps > 1:
            _keep_accumulated_sums_as_adds()
        self.step = step
        self.consecutive_nonfinite = consecutive_nonfinite
        self.stop_requested = stop_requested
        self.sum_keys = (*task.sum_keys, "loss", "examples", "gradient_norm", "finite_steps",
                         "failed_steps")
        self.global_batches = global_batches
        self.local_replicas = strategies.local_replica_count(strategy)
        self.variables = model.trainable_variables
        self._forward_backward = (tf.function(self._forward_backward_eager, jit_compile=True)
                                  if jit_compile else self._forward_backward_eager)
        self.train_loop = tf.function(self._train_loop)
        self.eval_loop = tf.function(self._eval_loop)

    # -- replica context -----------------------------------------------------

    def _forward_backward_eager(self, inputs, labels, denominators):
        with tf.GradientTape() as tape:
            outputs = self.model(inputs, training=True)
            loss, sums = self.task.compute_loss(labels, outputs, inputs, denominators)
            scaled_loss = self.loss_scale.scale_loss(loss)
        gradients = tape.gradient(scaled_loss, self.variables)
        sums["loss"] = loss
        sums["examples"] = self.task.batch_examples(inputs, labels)
        # Zeros, not None, for weights the task's loss does not reach (the
        # pooler under a span or token head), so the all-reduce gets a full
        # list. (TF's UnconnectedGradients.ZERO fails on Keras 3 variables.)
        gradients = [tf.zeros(v.shape, v.dtype) if g is None else _dense(g)
                     for g, v in zip(gradients, self.variables)]
        return gradients, sums

    def _accumulated_gradients(self, inputs, labels, denominators):
        """Gradients and sums over `accumulation_steps` micro-batches, one at a time."""
        parts = self.accumulation_steps
        micro_inputs = _split_batch(inputs, parts)
        micro_labels = _split_batch(labels, parts)

        def micro_batch(i):
            return (tf.nest.map_structure(lambda x: x[i], micro_inputs),
                    tf.nest.map_structure(lambda x: x[i], micro_labels))

        gradients, sums = self._forward_backward(*micro_batch(0), denominators)
        for i in tf.range(1, parts):
            more_gradients, more_sums = self._forward_backward(*micro_batch(i), denominators)
            gradients = [g + h for g, h in zip(gradients, more_gradients)]
            sums = {key: sums[key] + more_sums[key] for key in sums}
        return gradients, sums

    def _apply_if_finite(self, gradients, finite):
        """`optimizer.apply` when `finite`; a no-op otherwise, on every strategy."""
        def apply(gradients):
            self.optimizer.apply(gradients, self.variables)

        if tf.__internal__.distribute.strategy_supports_no_merge_call():
            tf.cond(finite, lambda: apply(gradients), lambda: None)
            return

        # A `cond` whose branch synchronises replicas (the optimizer's update
        # of mirrored variables) must be built in the cross-replica context.
        def cross_replica(strategy, gradients, finite):
            finite = strategy.experimental_local_results(finite)[0]
            tf.cond(finite,
                    lambda: strategy.extended.call_for_each_replica(apply, args=(gradients,)),
                    lambda: None)

        tf.distribute.get_replica_context().merge_call(cross_replica, args=(gradients, finite))

    def _replica_train_step(self, batch):
        inputs, labels = batch
        denominators = _sum_over_replicas(self.task.loss_denominators(labels))
        if self.accumulation_steps > 1:
            gradients, sums = self._accumulated_gradients(inputs, labels, denominators)
        else:
            gradients, sums = self._forward_backward(inputs, labels, denominators)
        gradients = _sum_over_replicas(gradients)
        sums = _sum_over_replicas(sums)
        gradients = self.loss_scale.unscale(gradients)
        gradient_norm = tf.linalg.global_norm(gradients)
        finite = tf.logical_and(tf.math.is_finite(gradient_norm), tf.math.is_finite(sums["loss"]))
        if self.clip_norm:
            gradients, _ = tf.clip_by_global_norm(gradients, self.clip_norm,
                                                  use_norm=gradient_norm)
        self._apply_if_finite(gradients, finite)
        # A non-finite step under a shrinkable loss scale is the scale's job,
        # not a failure; anything else counts towards the rollback.
        failure = tf.logical_and(tf.logical_not(finite), self.loss_scale.at_minimum)
        self.loss_scale.update(finite)
        sums["gradient_norm"] = tf.where(finite, gradient_norm, 0.0)
        sums["finite_steps"] = tf.cast(finite, tf.float32)
        sums["failed_steps"] = tf.cast(failure, tf.float32)
        return sums

    def _replica_eval_step(self, batch):
        inputs, labels = batch
        outputs = self.model(inputs, training=False)
        sums = self.task.metric_sums(labels, outputs, inputs)
        return _sum_over_replicas(sums)

    # -- cross-replica context -----------------------------------------------

    def _next_batch(self, iterator):
        """The next step's per-replica batches from a plain iterator.

        One element per local replica, in replica order, as
        `distribute_datasets_from_function` would hand them out; or one
        global batch whose consecutive slices go to the replicas.
        """
        if self.global_batches:
            batch = next(iterator)
            replicas = self.strategy.num_replicas_in_sync

            def replica_slice(context):
                def cut(x):
                    size = tf.shape(x)[0] // replicas
                    return x[context.replica_id_in_sync_group * size:
                             (context.replica_id_in_sync_group + 1) * size]
                return tf.nest.map_structure(cut, batch)

            return self.strategy.experimental_distribute_values_from_function(replica_slice)
        batches = [next(iterator) for _ in range(self.local_replicas)]
        return self.strategy.experimental_distribute_values_from_function(
            lambda context: batches[context.replica_id_in_sync_group % self.local_replicas])

    def _local(self, per_replica):
        # Every replica holds the same all-reduced values; take the first.
        return tf.nest.map_structure(
            lambda x: self.strategy.experimental_local_results(x)[0], per_replica)

    def _train_loop(self, iterator, num_steps):
        """Runs `num_steps` (>= 1) global steps, fewer after a stop request.

        Returns the metric sums."""
        def one_step():
            sums = self._local(self.strategy.run(self._replica_train_step,
                                                 args=(self._next_batch(iterator),)))
            self.step.assign_add(1)
            failed = sums["failed_steps"] > 0
            self.consecutive_nonfinite.assign(
                tf.where(failed, self.consecutive_nonfinite + 1,
                         tf.zeros_like(self.consecutive_nonfinite)))
            return sums

        # Every step runs the same traced code (the loop body), so the
        # numerics of a step do not depend on where a loop starts: a run
        # resumed mid-loop computes bit-identical updates.
        totals = {key: tf.zeros([], tf.float32) for key in self.sum_keys}
        for i in tf.range(num_steps):
            if i > 0 and self.stop_requested is not None and self.stop_requested:
                break
            sums = one_step()
            totals = {key: totals[key] + sums[key] for key in totals}
        return totals

    def _eval_loop(self, iterator, num_steps):
        """Metric sums over `num_steps` eval batches."""
        def one_step():
            return self._local(self.strategy.run(self._replica_eval_step,
                                                 args=(self._next_batch(iterator),)))

        totals = one_step()
        for _ in tf.range(1, num_steps):
            sums = one_step()
            totals = {key: totals[key] + sums[key] for key in totals}
        return totals
