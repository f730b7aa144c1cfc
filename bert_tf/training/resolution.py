"""The run's final experiment, decided once, before anything is built.

In this order:

    on loading (`bert_tf.tasks.load_experiment`, the one step that sees which
    keys the command line set): `explicit_steps_win`
    then `resolve_run`, the first thing a `Trainer` does:
      1. the task fills what the config leaves to a checkpoint (`Task.resolve`)
      2. `runtime.mixed_precision: auto` becomes the policy this hardware runs fastest
         (a resumed run chooses again, so a run moved to other hardware computes
         in what is fastest there; weights and optimizer slots are float32 always)
      3. the task checks the result (`Task.validate`), naming the key at fault
      4. `trainer.train_epochs` becomes `trainer.train_steps` (counting the
         examples reads the training data, so only a validated config does it)
      5. the run already in `model_dir`, if any, must resume as this experiment

The task and the trainer then hold this one experiment object, and
`params.yaml` records it. Importing this module imports no TensorFlow.
"""

from __future__ import annotations

import dataclasses
import logging
import math

from bert_tf.training import run_directory


def explicit_steps_win(experiment, set_keys: frozenset[str], source: str):
    """`experiment` without `trainer.train_epochs` when the command line set only the steps.

    Fine-tuning configs set `train_epochs`; a `trainer.train_steps` the command
    line sets is the more explicit wish. When it sets both, the epochs decide.

    Args:
      experiment: the experiment as loaded (file plus overrides).
      set_keys: the dotted keys the overrides set (`config.override_keys`).
      source: the config file, named in the log.
    """
    trainer = experiment.trainer
    if ("trainer.train_steps" not in set_keys or "trainer.train_epochs" in set_keys
            or not trainer.train_epochs):
        return experiment
    logging.info("--set trainer.train_steps=%d replaces trainer.train_epochs=%g of %s",
                 trainer.train_steps, trainer.train_epochs, source)
    return dataclasses.replace(experiment,
                               trainer=dataclasses.replace(trainer, train_epochs=0.0))


def steps_from_epochs(experiment, task):
    """`experiment` with `trainer.train_steps` counted from `train_epochs`, if set.

    Args:
      experiment: the experiment, its task validated.
      task: its `Task` (`num_train_examples` is the epoch size).

    Raises:
      ValueError: epochs for a task that streams its data (no epoch size).
    """
    trainer = experiment.trainer
    if not trainer.train_epochs:
        logging.info("trainer.train_steps=%d decides the step count", trainer.train_steps)
        return experiment
    examples = task.num_train_examples
    if examples is None:
        raise ValueError(
            f"trainer.train_epochs={trainer.train_epochs:g} needs an epoch size, but "
            f"the {task.name!r} task streams its data: set trainer.train_steps instead")
    steps = max(math.ceil(trainer.train_epochs * examples / trainer.global_batch_size), 1)
    logging.info("trainer.train_epochs=%g decides the step count: %g epochs of %d examples "
                 "at batch %d = %d steps", trainer.train_epochs, trainer.train_epochs,
                 examples, trainer.global_batch_size, steps)
    return dataclasses.replace(experiment,
                               trainer=dataclasses.replace(trainer, train_steps=steps))


def resolve_run(task, experiment, strategy, model_dir: str, init_checkpoint: str | None = None,
                allow_data_change: bool = False):
    """The run's final experiment, also made `task.experiment` (steps 1 to 5 above).

    Args:
      task: the run's `Task`.
      experiment: the experiment as loaded (it replaces `task.experiment` first).
      strategy: the `tf.distribute.Strategy` the run trains under (for `auto` precision).
      model_dir: the run directory; a checkpoint there wins over `init_checkpoint`.
      init_checkpoint: the weights a fresh run starts from, if any.
      allow_data_change: resume although the training data settings changed.

    Raises:
      ValueError: the experiment is invalid (the message names the key).
      run_directory.IncompatibleRunError: `model_dir` holds a run this one cannot continue.
    """
    from bert_tf.training import precision  # TensorFlow: the policy depends on the devices

    task.experiment = experiment
    task.experiment = precision.resolve_experiment(task.resolve(init_checkpoint, model_dir),
                                                   strategy)
    task.validate()
    task.experiment = steps_from_epochs(task.experiment, task)
    run_directory.check_resumable(model_dir, task.experiment, task, allow_data_change)
    return task.experiment
