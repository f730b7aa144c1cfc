"""A fine-tuning run rebuilt from its `model_dir`, evaluated or asked for predictions.

The run's `params.yaml` holds the resolved experiment (encoder, vocabulary,
casing and data options), so `model_dir` is all that is needed; `--set`
overrides adjust data options such as `data.max_eval_examples`.
"""

import logging
import os

from bert_tf import tasks
from bert_tf.checkpoints import native
from bert_tf.training.inference import inference_fn
from bert_tf.training.trainer import PARAMS_FILE


def load_run(model_dir, overrides=()):
    """(task, model, checkpoint prefix) of a fine-tuning run's newest checkpoint."""
    params = os.path.join(model_dir, PARAMS_FILE)
    if not os.path.isfile(params):
        raise FileNotFoundError(f"{params} not found: is {model_dir} a bert_tf training run?")
    task_class, experiment = tasks.load_experiment(params, overrides)
    if not hasattr(task_class, "evaluate_model"):
        raise ValueError(f"{model_dir} is a {experiment.task!r} run; evaluate and predict "
                         "are for fine-tuning runs")
    task = task_class(experiment)
    task.validate()
    precision = experiment.runtime.mixed_precision
    model = task.build_model(dtype=None if precision == "float32" else precision)
    return task, model, native.restore_weights(model, model_dir)


def run(model_dir, sources=None, output_dir=None, batch_size=64, overrides=()):
    """Metrics `{name: value}` of the run on `sources` (default: its evaluation sources).

    With `output_dir`, prediction files (and metrics JSON) are written there.
    """
    task, model, prefix = load_run(model_dir, overrides)
    logging.info("loaded %s", prefix)
    return task.evaluate_model(inference_fn(model), sources or None, output_dir, batch_size)
