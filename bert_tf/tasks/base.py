"""The task protocol: everything the trainer, evaluate, predict, export and sweep use.

A task is the math of one replica for one kind of training (Model Garden's
split): the model, its input pipeline, its loss and metrics, how it is
evaluated and what record its model carries into exports. The trainer
(`bert_tf.training.trainer`) knows a task only through `Task`; it imports
no task module.

Life of a task in `python -m bert_tf.train`:

    task = TaskClass(experiment)
    # `bert_tf.training.resolution.resolve_run`, before anything is built:
    task.resolve(init_checkpoint, model_dir)  # fill what the config leaves open
    task.validate()                           # eager checks; fixes the tokenizer contract
    task.num_train_examples                   # the epoch size, for trainer.train_epochs
    task.experiment = the final experiment    # the trainer's, the one params.yaml records
    model = task.build_model(dtype)           # under the strategy's scope
    task.initialize(model, init_checkpoint)   # a fresh run only
    task.train_dataset(...) -> TrainStep(task.loss_denominators, task.compute_loss)
    task.metrics(summed metric_sums)          # every loop
    task.evaluate_model(...) or in-graph eval_dataset batches
    task.task_record(), task.tokenizer_contract(), task.vocab_file -> bert_tf_model.json

The checks every task shares (data against encoder, checkpoint against
encoder) live here too.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from bert_tf.checkpoints import assign
from bert_tf.checkpoints.task_record import TaskRecord
from bert_tf.text import tokenizer_contract as contracts
from bert_tf.training.optimizers import OptimizerConfig
from bert_tf.training.trainer_config import RuntimeConfig, TrainerConfig

# Encoder fields that may differ between a checkpoint and the model it
# initialises or resumes (regularisation, not shape or function).
REGULARISATION_FIELDS = ("hidden_dropout", "attention_dropout", "initializer_range")


def encoder_config_differences(old, new, ignore=REGULARISATION_FIELDS):
    """`{field: (old, new)}` for the encoder fields that differ, ignoring `ignore`.

    Args:
      old, new: `EncoderConfig`s.
      ignore: field names left out of the comparison.
    """
    old, new = old.to_dict(), new.to_dict()
    return {key: (old.get(key), new.get(key)) for key in sorted(set(old) | set(new))
            if key not in ignore and old.get(key) != new.get(key)}


def check_data_fits_encoder(data, encoder) -> dict:
    """The tokenizer contract of `data.vocab_file`; errors naming the keys that disagree.

    Args:
      data: a data config with `vocab_file`, `lower_case` and `max_seq_length`.
      encoder: the `EncoderConfig` the data feeds.

    Raises:
      ValueError: the vocab size or the sequence length does not fit the encoder.
    """
    contract = contracts.contract_from_vocab(data.vocab_file, data.lower_case)
    if contract["vocab_size"] != encoder.vocab_size:
        raise ValueError(
            f"data.vocab_file {data.vocab_file} has {contract['vocab_size']} tokens but "
            f"model.encoder.vocab_size is {encoder.vocab_size}")
    if data.max_seq_length > encoder.max_position_embeddings:
        raise ValueError(
            f"data.max_seq_length ({data.max_seq_length}) exceeds "
            f"model.encoder.max_position_embeddings ({encoder.max_position_embeddings})")
    return contract


def check_encoder_fits(checkpoint_config, model_config, path) -> None:
    """Raises `CheckpointMismatchError` listing the encoder fields that differ.

    Args:
      checkpoint_config: the `EncoderConfig` of the checkpoint at `path`.
      model_config: the `EncoderConfig` the experiment configures.
      path: the checkpoint, named in the error.
    """
    differences = encoder_config_differences(checkpoint_config, model_config)
    if differences:
        listed = ", ".join(f"{k}: checkpoint {a!r} vs config {b!r}"
                           for k, (a, b) in differences.items())
        raise assign.CheckpointMismatchError(
            f"--init_checkpoint {path} does not fit model.encoder ({listed})")


def experiment_class(name: str, task_name: str, model_class: type, data_class: type,
                     doc: str) -> type:
    """The experiment dataclass of a task: what one YAML config file holds.

    Every experiment has the same sections: `task` (the task's registered
    name), `model` (`model_class`), `data` (`data_class`) and the
    `optimizer`, `trainer` and `runtime` sections the trainer reads.

    Args:
      name: the class name, e.g. "GlueExperiment".
      task_name: the default of `task`, the name the task is registered under.
      model_class: the dataclass of the `model` section.
      data_class: the dataclass of the `data` section.
      doc: the class docstring.
    """
    field = dataclasses.field
    cls = dataclasses.make_dataclass(name, [
        ("task", str, field(default=task_name)),
        ("model", model_class, field(default_factory=model_class)),
        ("data", data_class, field(default_factory=data_class)),
        ("optimizer", OptimizerConfig, field(default_factory=OptimizerConfig)),
        ("trainer", TrainerConfig, field(default_factory=TrainerConfig)),
        ("runtime", RuntimeConfig, field(default_factory=RuntimeConfig)),
    ])
    cls.__doc__ = doc
    cls.__module__ = data_class.__module__
    return cls


class Task(abc.ABC):
    """The contract between a task and the code that trains, evaluates and exports it.

    Subclasses set the class attributes `config_class` (the experiment
    dataclass loaded from YAML: sections `task`, `model`, `data`,
    `optimizer`, `trainer`, `runtime`) and `name` (its registered name,
    the `task` key of the YAML), and implement every abstract method.
    The methods with a body are optional hooks; their defaults describe a
    task without that ability.

    `validate` must record the tokenizer contract of the run's vocabulary
    in `self._tokenizer_contract` (usually `check_data_fits_encoder(...)`).

    `self.experiment` is the run's experiment. The trainer replaces it by the
    final one (precision chosen, step count decided) before it builds anything,
    so a task reads its sections from `self.experiment` when it needs them
    rather than keeping copies made in `__init__`.

    Args:
      experiment: an instance of `config_class`.
    """

    config_class: ClassVar[type]
    name: ClassVar[str]

    # Evaluation, one of two kinds (or none):
    # - host evaluation (fine-tuning): `supports_evaluation` is True and
    #   `evaluate_model` runs every evaluation example through the model and
    #   computes the official metric in Python; `main_metric` names the key a
    #   sweep maximises. `python -m bert_tf.evaluate` / `predict` / `sweep`
    #   take only such tasks.
    # - in-graph evaluation (pretraining): `has_eval_data` is True and
    #   `eval_dataset` gives held-out batches summed with `metric_sums`.
    supports_evaluation: ClassVar[bool] = False
    has_eval_data: bool = False

    def __init__(self, experiment):
        self.experiment = experiment
        self._tokenizer_contract = None

    # -- configuration -----------------------------------------------------

    def resolve(self, init_checkpoint: str | None = None, model_dir: str | None = None):
        """Fills what the config leaves to a checkpoint; returns the resolved experiment.

        The default keeps the experiment as it is (its config names everything).

        Args:
          init_checkpoint: the run's `--init_checkpoint`, if any.
          model_dir: the run's directory (a resumed run's own checkpoint wins).
        """
        del init_checkpoint, model_dir
        return self.experiment

    def fixed_shape_settings(self) -> dict[str, Any]:
        """`{config key: value}` that make every training batch the same shape (for TPUs).

        The default: the task's batches never vary in shape.
        """
        return {}

    @abc.abstractmethod
    def validate(self) -> None:
        """Eager checks naming the config key at fault, before anything is built.

        Sets `self._tokenizer_contract`. Raises ValueError.
        """

    def tokenizer_contract(self) -> dict:
        """The run's tokenizer contract (vocab digest, size, casing), fixed by `validate`."""
        if self._tokenizer_contract is None:
            raise RuntimeError(f"{type(self).__name__}.validate() records the tokenizer "
                               "contract; call it first")
        return self._tokenizer_contract

    @property
    @abc.abstractmethod
    def vocab_file(self) -> str:
        """The vocabulary the run tokenizes with (copied into the run's directory)."""

    @abc.abstractmethod
    def task_record(self) -> TaskRecord:
        """What the trained model does and how it is fed (stored in `bert_tf_model.json`)."""

    @abc.abstractmethod
    def model_differences(self, old, new) -> dict[str, tuple[Any, Any]]:
        """`{config key: (old, new)}` of the model fields a resumed run cannot change.

        Args:
          old: the `model` section of the run's `params.yaml`.
          new: the `model` section of this experiment.
        """

    # Data fields that only choose what is evaluated: a resumed run may change them.
    EVALUATION_DATA_FIELDS: ClassVar[frozenset[str]] = frozenset(
        {"eval_files", "max_eval_examples"})
    # Data fields naming a file, compared by content: a resumed fine-tuning run
    # reads the vocabulary copied into its own directory, not the init checkpoint's.
    CONTENT_DATA_FIELDS: ClassVar[frozenset[str]] = frozenset({"vocab_file"})
    # Trainer fields that change which training examples the next batch holds.
    BATCHING_TRAINER_FIELDS: ClassVar[tuple[str, ...]] = ("global_batch_size",
                                                          "input_distribution")

    def input_differences(self, old, new) -> dict[str, tuple[Any, Any]]:
        """`{config key: (old, new)}` of settings that change which batches come next.

        A run resumed with any of them changed no longer matches an
        uninterrupted one (the trainer refuses it unless told otherwise). By
        default every `data` field but `EVALUATION_DATA_FIELDS`, and the
        trainer's batching fields.

        Args:
          old: the run's experiment, from its `params.yaml`.
          new: this experiment.
        """
        differences = {}
        for field in dataclasses.fields(new.data):
            if field.name in self.EVALUATION_DATA_FIELDS:
                continue
            before, after = getattr(old.data, field.name), getattr(new.data, field.name)
            if field.name in self.CONTENT_DATA_FIELDS and contracts.same_file_content(
                    before, after):
                continue
            if before != after:
                differences[f"data.{field.name}"] = (before, after)
        for name in self.BATCHING_TRAINER_FIELDS:
            before, after = getattr(old.trainer, name), getattr(new.trainer, name)
            if before != after:
                differences[f"trainer.{name}"] = (before, after)
        return differences

    # -- model -------------------------------------------------------------

    @abc.abstractmethod
    def build_model(self, dtype: str | None = None):
        """The freshly initialised Keras model; called under the strategy's scope.

        Args:
          dtype: a Keras dtype policy name (mixed precision), or None.
        """

    @abc.abstractmethod
    def initialize(self, model, path: str) -> tuple[list[str], list[str]]:
        """Loads pretrained weights from the checkpoint at `path` into `model`.

        Returns:
          (names of the loaded weights, names of the weights left fresh).
        """

    # -- data --------------------------------------------------------------

    @abc.abstractmethod
    def train_dataset(self, input_context, global_batch_size: int):
        """Endless `(inputs, labels)` batches for one input pipeline.

        Args:
          input_context: a `tf.distribute.InputContext`, or None for one
            pipeline that yields whole global batches.
          global_batch_size: examples per global step.
        """

    @property
    def num_train_examples(self) -> int | None:
        """The number of training examples (what `trainer.train_epochs` counts in).

        None (the default): the data is streamed and has no epoch size, so
        a run must be given `trainer.train_steps`.
        """
        return None

    def eval_dataset(self, input_context, global_batch_size: int):
        """Endless held-out `(inputs, labels)` batches (when `has_eval_data`)."""
        raise NotImplementedError(f"the {self.name!r} task has no in-graph evaluation data")

    # -- loss and metrics --------------------------------------------------

    @property
    @abc.abstractmethod
    def sum_keys(self) -> tuple[str, ...]:
        """The keys of `metric_sums` (summed over replicas and steps by the trainer)."""

    @abc.abstractmethod
    def loss_denominators(self, labels: Mapping[str, Any]) -> dict:
        """This replica's share of the loss normalisers; the trainer sums them over replicas."""

    @abc.abstractmethod
    def compute_loss(self, labels, outputs, inputs, denominators) -> tuple[Any, dict]:
        """(this replica's share of the global loss, `metric_sums`).

        Args:
          labels, outputs, inputs: this replica's batch and the model's outputs.
          denominators: `loss_denominators` summed over all replicas.
        """

    def batch_examples(self, inputs: Mapping[str, Any], labels: Mapping[str, Any]):
        """This replica's training examples in a batch (float32 scalar), for examples/s.

        By default one per row; tasks with packed rows count the sequences.
        """
        import tensorflow as tf  # here: this module stays importable without TensorFlow

        return tf.cast(tf.shape(tf.nest.flatten(labels)[0])[0], tf.float32)

    @abc.abstractmethod
    def metric_sums(self, labels, outputs, inputs) -> dict:
        """Float32 scalar sums (keys `sum_keys`) from which `metrics` computes its values."""

    @abc.abstractmethod
    def metrics(self, sums: Mapping[str, Any]) -> dict[str, float]:
        """Loss and metrics (Python floats) from summed `metric_sums`."""

    # -- host evaluation ---------------------------------------------------

    def evaluate_model(self, predict_fn: Callable, sources=None, output_dir: str | None = None,
                       batch_size: int = 64) -> dict[str, float]:
        """Official metrics of the model on `sources` (when `supports_evaluation`).

        Args:
          predict_fn: `inputs -> outputs` of the model in inference mode.
          sources: evaluation sources (splits or files); None: the task's own.
          output_dir: when given, prediction files are written there too.
          batch_size: examples per model call.
        """
        raise NotImplementedError(f"the {self.name!r} task has no host evaluation")

    # What `evaluate` and `predict` name an evaluation source by: "file" (a
    # data file, `--input_file`) or "split" (a split of the dataset folder
    # the run's config names, `--split`, as GLUE's).
    source_type: ClassVar[str] = "file"

    def check_sources(self, sources: Sequence[str], output_dir: str | None = None) -> None:
        """Refuses, before any model is built, sources `evaluate_model` cannot run on.

        `evaluate` and `predict` call it right after `validate`, so an
        impossible request fails at once rather than after the evaluation.
        The default accepts every source.

        Args:
          sources: the splits or files asked for; empty: the task's own.
          output_dir: where prediction files would go; None: metrics only.

        Raises:
          ValueError or FileNotFoundError, naming the source at fault.
        """
        del sources, output_dir

    @property
    def prediction_sources(self) -> tuple[str, ...]:
        """What `predict` runs on when no source is named (GLUE: the test splits).

        Empty (the default): the user must name the sources.
        """
        return ()

    @property
    def main_metric(self) -> str:
        """The key of `evaluate_model`'s result that model selection maximises."""
        raise NotImplementedError(f"the {self.name!r} task has no host evaluation")

    def in_percent(self, metric: str) -> bool:
        """Whether `evaluate_model` reports `metric` on a 0-100 scale, not as a fraction.

        Args:
          metric: a key of `evaluate_model`'s result.

        Returns:
          False by default; True for scores an official script gives in percent
          (SQuAD's EM and F1), so a report can put every task on one scale.
        """
        return False

    def higher_is_better(self, metric: str) -> bool:
        """Whether a larger value of `metric` means a better model (model selection).

        Args:
          metric: a key of `evaluate_model`'s result, possibly prefixed by its
            source (`eng.testa/f1`).

        Returns:
          False for losses, errors and perplexities (by name); True for the
          rest, which covers every official score of the built-in tasks.
        """
        name = metric.rsplit("/", 1)[-1]
        lower_is_better = ("loss", "error", "perplexity")
        return not any(name == word or name.endswith("_" + word) for word in lower_is_better)
