"""TensorFlow's coordinated preemption handling, for multi-worker and TPU runs.

On SIGTERM, TensorFlow's `PreemptionCheckpointHandler` agrees with every
worker on one step and saves the checkpoint there; its exit function here
saves this worker's input state and leaves with `PREEMPTION_EXIT_CODE`.
"""

import logging
import os

import tensorflow as tf

from bert_tf.training.exit_codes import PREEMPTION_EXIT_CODE


def preemption_handler(strategy, checkpoint, step):
    """The `PreemptionCheckpointHandler` of a multi-worker or TPU run; None otherwise.

    Args:
      strategy: the run's `tf.distribute.Strategy`.
      checkpoint: the run's `TrainingCheckpoint` (the handler saves through its manager).
      step: the global step variable (the preemption checkpoint's number).
    """
    if not isinstance(strategy, (tf.distribute.MultiWorkerMirroredStrategy,
                                 tf.distribute.TPUStrategy)):
        return None
    input_manager = checkpoint.input_manager

    def save_input_state_and_exit():
        if input_manager is not None:
            input_manager.save(checkpoint_number=step)
        logging.warning("preempted at step %d: checkpoint saved, exiting with code %d",
                        int(step.numpy()), PREEMPTION_EXIT_CODE)
        os._exit(PREEMPTION_EXIT_CODE)

    return tf.distribute.experimental.PreemptionCheckpointHandler(
        strategy.cluster_resolver, checkpoint.manager,
        termination_config=tf.distribute.experimental.TerminationConfig(
            exit_fn=save_input_state_and_exit))
