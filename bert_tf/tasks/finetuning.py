"""What every fine-tuning task shares: the encoder from a checkpoint, batches, evaluation.

A fine-tuning task (GLUE, SQuAD, NER, SWAG) is a pretrained encoder plus a
small head. The pieces common to all of them live here:

- `resolve`: the encoder shape, vocabulary and casing come from
  `--init_checkpoint` (or from the run's own `model_dir` when resuming) unless
  the config sets them, and are written back into the experiment, so
  `params.yaml` describes the run completely for evaluation and export;
- `initialize`: the encoder's weights from any supported checkpoint format,
  the head starting fresh;
- input pipelines over an in-memory table of examples: a seeded shuffle of
  example *indices* (small iterator state to checkpoint), batching, a
  per-batch `make_batch` that tokenizes in graph or gathers precomputed
  features, and dynamic padding (each batch cut to its longest sequence);
- host-side evaluation: every evaluation example goes through the model once
  and the task computes its official metric in Python.

Shapes: B batch, S sequence length, C choices.
"""

import abc
import dataclasses
import os

import numpy as np
import tensorflow as tf

from bert_tf import config as config_lib
from bert_tf import storage
from bert_tf.checkpoints import assign, loading, native, weight_map
from bert_tf.checkpoints.task_record import TaskRecord
from bert_tf.data import packing
from bert_tf.models.bert_encoder import BertEncoder
from bert_tf.models.encoder_config import EncoderConfig
from bert_tf.tasks import row_packing
from bert_tf.tasks.base import (
    Task,
    check_data_fits_encoder,
    check_encoder_fits,
    encoder_config_differences,
)
from bert_tf.tasks.base import experiment_class as base_experiment_class
from bert_tf.text import tokenizer_contract
from bert_tf.text.segment_packer import SEQUENCE_KEYS, SegmentPacker, trim_padding
from bert_tf.text.tokenizer import BertTokenizer

# Sequence lengths after dynamic padding are rounded up to a multiple of
# this, so the kernels see a handful of shapes instead of every length.
PAD_TO_MULTIPLE = 8


@dataclasses.dataclass
class FinetuningModelConfig:
    """The encoder and the head's dropout."""

    # None: the encoder of --init_checkpoint (shape and activation). The
    # trainer records the resolved encoder in params.yaml.
    encoder: EncoderConfig | None = None
    # Dropout before the task head; None: the encoder's hidden dropout.
    head_dropout: float | None = None


@config_lib.retired_keys(row_packing.RETIRED_KEYS)
@dataclasses.dataclass
class FinetuningDataConfig:
    """Options every fine-tuning task's data shares."""

    # "": the vocabulary shipped with --init_checkpoint.
    vocab_file: str = ""
    # None: as the checkpoint's tokenizer contract says (or guessed from the vocab).
    lower_case: bool | None = None
    max_seq_length: int = 128
    # Cut each batch to its longest sequence (rounded up to a multiple of 8).
    # Turn off for TPUs, which need fixed shapes.
    dynamic_padding: bool = True
    # Most training examples per row (bert_tf.tasks.row_packing; GLUE and NER;
    # 1: one per row), each still encoded as if alone; a batch then counts rows,
    # not examples, so the recipes keep 1.
    max_sequences_per_row: int = row_packing.DEFAULT_MAX_SEQUENCES_PER_ROW
    # Examples assigned to rows at a time (first-fit within the window).
    packing_window: int = row_packing.DEFAULT_WINDOW
    # > 0: use only the first N training / evaluation examples (quick runs).
    max_train_examples: int = 0
    max_eval_examples: int = 0
    # Seeds the order of the training examples.
    seed: int = 0


def experiment_class(name: str, task_name: str, data_class: type, doc: str) -> type:
    """The experiment dataclass of a fine-tuning task (model section: `FinetuningModelConfig`).

    Args:
      name, task_name, data_class, doc: as in `bert_tf.tasks.base.experiment_class`.
    """
    return base_experiment_class(name, task_name, FinetuningModelConfig, data_class, doc)


def _pad_sequence_axis(arrays, width):
    """Concatenates [b_i, s_i, ...] logits along axis 0, padding axis 1 to `width` with -inf.

    A batch cut to its longest sequence has no logits past that length;
    -inf says so, where 0 would outrank every negative real logit in a
    top-k (SQuAD's n-best) or an argmax.
    """
    padded = []
    for array in arrays:
        pad = [(0, 0), (0, width - array.shape[1])] + [(0, 0)] * (array.ndim - 2)
        padded.append(np.pad(array, pad, constant_values=-np.inf))
    return np.concatenate(padded, axis=0)


def _fixed_batch_size(batch, batch_size):
    """`batch` with its leading dimension declared `batch_size`.

    The tokenizer's ragged ops lose the static batch size of the index batch;
    TPUs compile the train step for fixed shapes, so it is restored here.
    """
    return tf.nest.map_structure(
        lambda x: tf.ensure_shape(x, [batch_size, *x.shape[1:]]), batch)


def _one_example_per_row(inputs, labels):
    """Unpacked batches for a packed model: each row one example, its [CLS] at 0."""
    batch = tf.shape(inputs["token_ids"])[0]
    return {**inputs, "cls_positions": tf.zeros([batch, 1], tf.int32)}, labels


class FinetuningTask(Task):
    """Base of the fine-tuning tasks; subclasses define the model, the batches and the metric.

    Subclasses set `config_class`, `name` and `kind` (the task record's
    kind) and implement `_task_model(encoder)`, `_read_examples(source)`,
    `_make_table(source)`, `make_batch(table, indices)`, `metric_sums`,
    `evaluate_outputs` and `record_fields`. A source is "train" or one of
    the evaluation sources (a GLUE split or a file).
    """

    kind: str | None = None
    # Output keys whose axis 1 is the sequence: logits, padded with -inf to
    # max_seq_length when the batches of an evaluation are concatenated.
    sequence_outputs = ()
    # Label keys with a sequence axis (cut with the inputs).
    sequence_labels = ()
    # Fine-tuning evaluates on the host with `evaluate_model`.
    supports_evaluation = True
    # Whether training examples may share a row (`data.max_sequences_per_row`). SQuAD's
    # windows and SWAG's choice groups keep one example per row.
    packable = False
    # Inputs of the packed model besides the encoder's (e.g. "cls_positions"
    # for heads that read each example's [CLS]).
    packed_model_inputs = ()

    def __init__(self, experiment):
        super().__init__(experiment)
        self._tokenizer = None
        self._examples = {}
        self._tables = {}

    @property
    def model_config(self):
        return self.experiment.model

    @property
    def data(self):
        return self.experiment.data

    # -- configuration ---------------------------------------------------------

    def resolve(self, init_checkpoint=None, model_dir=None):
        """Fills `model.encoder`, `data.vocab_file` and `data.lower_case` from a checkpoint.

        The run's own `model_dir` wins over `init_checkpoint` once it holds a
        checkpoint (a resumed run keeps its shape). Values the config sets
        are kept. Returns the resolved experiment (also `self.experiment`).
        """
        model, data = self.experiment.model, self.experiment.data
        if model.encoder is not None and data.vocab_file and data.lower_case is not None:
            return self.experiment
        source = None
        if model_dir and native.is_native(model_dir):
            source = model_dir
        elif init_checkpoint:
            source = init_checkpoint
        if source is None:
            missing = [key for key, value in (("model.encoder", model.encoder),
                                              ("data.vocab_file", data.vocab_file))
                       if not value]
            if missing:
                raise ValueError(f"{' and '.join(missing)} not set and no --init_checkpoint "
                                 "to take them from")
            lower_case = tokenizer_contract.guess_lower_case(data.vocab_file)
            data = dataclasses.replace(data, lower_case=lower_case)
        else:
            info = loading.describe(source)
            encoder = model.encoder or info.encoder_config
            vocab_file = data.vocab_file or info.vocab_file
            if not vocab_file:
                raise ValueError(f"data.vocab_file is not set and {source} ships no vocab.txt")
            lower_case = data.lower_case
            if lower_case is None:
                contract = info.tokenizer_contract
                lower_case = (contract["lower_case"] if contract
                              else tokenizer_contract.guess_lower_case(vocab_file))
            model = dataclasses.replace(model, encoder=encoder)
            data = dataclasses.replace(data, vocab_file=vocab_file, lower_case=lower_case)
        self.experiment = dataclasses.replace(self.experiment, model=model, data=data)
        return self.experiment

    def fixed_shape_settings(self):
        # Dynamic padding cuts each batch to its longest row.
        return {"data.dynamic_padding": False} if self.data.dynamic_padding else {}

    def validate(self):
        """Eager checks naming the config key at fault, before anything is built."""
        data, encoder = self.data, self.model_config.encoder
        if encoder is None or not data.vocab_file or data.lower_case is None:
            raise ValueError("model.encoder, data.vocab_file and data.lower_case must be "
                             "resolved first (give --init_checkpoint)")
        self._tokenizer_contract = check_data_fits_encoder(data, encoder)
        row_packing.check(data)
        if row_packing.is_packed(data) and not self.packable:
            raise ValueError(f"{row_packing.KEY}: the {self.name!r} task keeps one example per "
                             f"row (packing is for GLUE and NER); set {row_packing.KEY}=1")
        # Built here, eagerly: its tables must not be created inside the
        # first tf.data function that happens to use it.
        self._tokenizer = BertTokenizer(data.vocab_file, lower_case=data.lower_case)

    @property
    def vocab_file(self):
        return self.data.vocab_file

    @property
    def tokenizer(self):
        """The in-graph WordPiece tokenizer of this run's vocabulary (after `validate`)."""
        if self._tokenizer is None:
            raise RuntimeError(f"{type(self).__name__}.validate() builds the tokenizer; "
                               "call it first")
        return self._tokenizer

    def packer(self, max_seq_length=None):
        return SegmentPacker.from_tokenizer(self.tokenizer,
                                            max_seq_length or self.data.max_seq_length)

    # -- model -----------------------------------------------------------------

    def build_model(self, dtype=None):
        """The task model on a fresh encoder; call under the strategy's scope."""
        encoder = BertEncoder.from_encoder_config(self.model_config.encoder, dtype=dtype)
        return self._task_model(encoder)

    @abc.abstractmethod
    def _task_model(self, encoder):
        """The task model (encoder plus head) on `encoder`."""

    def initialize(self, model, path):
        """Loads the encoder from a checkpoint of any format; the head starts fresh.

        Returns (names of the loaded weights, names of the fresh ones).
        """
        result = loading.load(path, "encoder", vocab_file=self.data.vocab_file,
                              lower_case=self.data.lower_case)
        check_encoder_fits(result.model.encoder_config, model.encoder.encoder_config, path)
        arrays = {slot.name: slot.variable.numpy()
                  for slot in weight_map.encoder_slots(result.model)}
        loaded = assign.assign_to_slots(weight_map.encoder_slots(model.encoder), arrays,
                                        f"{result.format} checkpoint {path}")
        encoder_ids = {id(v) for v in model.encoder.weights}
        fresh = [v.path for v in model.weights if id(v) not in encoder_ids]
        return loaded, fresh

    def model_differences(self, old, new):
        """`{key: (old, new)}` of model fields a resumed run cannot change."""
        if old.encoder is None or new.encoder is None:
            return {}
        return {f"model.encoder.{key}": values for key, values
                in encoder_config_differences(old.encoder, new.encoder).items()}

    # -- data ------------------------------------------------------------------

    @property
    def num_train_examples(self):
        """Rows per epoch: the training examples, or the rows they pack into."""
        count = len(self._table("train")["index"])
        if not row_packing.is_packed(self.data):
            return count
        # First-fit over the lengths in table order: each epoch's shuffled
        # order packs into about as many rows.
        lengths = np.concatenate([
            tf.reduce_sum(tf.cast(inputs["padding_mask"] > 0, tf.int32), axis=-1).numpy()
            for inputs, _ in self.eval_batches("train", 1024, single_example_rows=False)])
        return packing.count_rows(lengths, self.data.max_seq_length,
                                  self.data.max_sequences_per_row, self.data.packing_window)

    def examples(self, source):
        """The examples of `source`, read once, cut to `data.max_train_examples` /
        `max_eval_examples` (0: all) before any windowing."""
        if source not in self._examples:
            examples = self._read_examples(source)
            limit = (self.data.max_train_examples if source == "train"
                     else self.data.max_eval_examples)
            self._examples[source] = examples[:limit] if limit else examples
        return self._examples[source]

    def _table(self, source):
        """The model-ready table of `source`'s examples (numpy columns, `index` first), cached."""
        if source not in self._tables:
            table = self._make_table(source)
            if not len(table["index"]):
                raise ValueError(f"{self.name}: no examples in {source!r}")
            self._tables[source] = table
        return self._tables[source]

    @abc.abstractmethod
    def _read_examples(self, source):
        """The examples of `source` as read from its file."""

    @abc.abstractmethod
    def _make_table(self, source):
        """`{column: numpy array}` of `source`'s examples, model-ready, `index` first."""

    @abc.abstractmethod
    def make_batch(self, table, indices):
        """(inputs, labels) of the examples at `indices` (an int64 [B] tensor)."""

    def _finish_batch(self, inputs, labels):
        if not self.data.dynamic_padding:
            return inputs, labels
        both = trim_padding({**inputs, **labels}, SEQUENCE_KEYS + tuple(self.sequence_labels),
                            PAD_TO_MULTIPLE)
        return ({key: both[key] for key in inputs}, {key: both[key] for key in labels})

    def _graph_table(self, table):
        return {key: tf.constant(value) for key, value in table.items()}

    def train_dataset(self, input_context, global_batch_size):
        """Endless (inputs, labels) batches: a new seeded order every epoch."""
        table = self._table("train")
        graph_table = self._graph_table(table)
        batch_size = (input_context.get_per_replica_batch_size(global_batch_size)
                      if input_context is not None else global_batch_size)
        dataset = tf.data.Dataset.range(len(table["index"]))
        if input_context is not None and input_context.num_input_pipelines > 1:
            dataset = dataset.shard(input_context.num_input_pipelines,
                                    input_context.input_pipeline_id)
        # Shuffling indices keeps the iterator state (checkpointed) small; a
        # whole-table buffer gives a full permutation per epoch.
        dataset = dataset.shuffle(len(table["index"]), seed=self.data.seed,
                                  reshuffle_each_iteration=True).repeat()
        if row_packing.is_packed(self.data):
            return self._packed_rows(dataset, graph_table, batch_size)
        dataset = dataset.batch(batch_size, drop_remainder=True)
        dataset = dataset.map(
            lambda indices: _fixed_batch_size(self.make_batch(graph_table, indices), batch_size),
            num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        return dataset.prefetch(tf.data.AUTOTUNE)

    def _packed_rows(self, indices, graph_table, batch_size):
        """Batches of packed rows from a dataset of example indices (packed `data`)."""
        length, per_row = self.data.max_seq_length, self.data.max_sequences_per_row

        def assign(window):
            inputs, labels = self.make_batch(graph_table, window)  # [W, ...]
            lengths = tf.reduce_sum(inputs["padding_mask"], axis=-1)  # [W]
            return packing.to_slots({**inputs, **labels}, lengths, length, per_row)

        def merge(slots):
            return packing.merge_example_slots(slots, length, self.sequence_labels)

        def split(rows):
            keys = ("token_ids", "segment_ids", "padding_mask", *self.packed_model_inputs)
            inputs = {key: rows[key] for key in keys}
            labels = {key: value for key, value in rows.items()
                      if key not in inputs and key != "cls_positions"}
            return self._finish_batch(inputs, labels)

        rows = indices.batch(self.data.packing_window).map(assign).unbatch()
        rows = rows.map(merge, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        rows = rows.batch(batch_size, drop_remainder=True).map(split)
        return rows.prefetch(tf.data.AUTOTUNE)

    def eval_batches(self, source, batch_size, single_example_rows=True):
        """Every example of `source` once, in order, as (inputs, labels) batches.

        Args:
          source: "train" or an evaluation source.
          batch_size: examples per batch.
          single_example_rows: for a model trained on packed rows, give each
            example its own row with its [CLS] at 0 (the packed model's
            extra inputs); False gives the unpacked batches.
        """
        table = self._table(source)
        graph_table = self._graph_table(table)
        dataset = tf.data.Dataset.range(len(table["index"])).batch(batch_size)
        dataset = dataset.map(lambda indices: self.make_batch(graph_table, indices))
        if (single_example_rows and row_packing.is_packed(self.data)
                and self.packed_model_inputs):
            dataset = dataset.map(_one_example_per_row)
        return dataset.prefetch(tf.data.AUTOTUNE)

    def predict_outputs(self, predict_fn, source, batch_size=64):
        """The model's outputs for every example of `source`, as numpy arrays."""
        collected = {}
        for inputs, _ in self.eval_batches(source, batch_size):
            outputs = predict_fn(inputs)
            for key, value in outputs.items():
                collected.setdefault(key, []).append(np.asarray(value, np.float32))
        width = self.data.max_seq_length
        return {key: (_pad_sequence_axis(values, width) if key in self.sequence_outputs
                      else np.concatenate(values, axis=0))
                for key, values in collected.items()}

    # -- evaluation ------------------------------------------------------------

    @property
    def eval_sources(self):
        """The evaluation sources run during and at the end of training."""
        return ("dev",)

    def evaluate_model(self, predict_fn, sources=None, output_dir=None, batch_size=64):
        """Official metrics on each evaluation source, `{name: value}` (prefixed when several).

        With `output_dir`, each source's predictions are written there too.
        """
        sources = sources or self.eval_sources
        metrics = {}
        for source in sources:
            outputs = self.predict_outputs(predict_fn, source, batch_size)
            values = self.evaluate_outputs(source, outputs, output_dir)
            prefix = f"{source_name(source)}/" if len(sources) > 1 else ""
            metrics.update({prefix + key: value for key, value in values.items()})
        return metrics

    def check_sources(self, sources, output_dir=None):
        """Each source is an existing file, and no two share the name their metrics
        (`<name>/f1`) and prediction files are given (see `source_name`).

        Args:
          sources: data files; empty: `eval_sources`.
          output_dir: where prediction files would go (unused here).
        """
        del output_dir
        named = {}
        for source in sources or self.eval_sources:
            if not storage.isfile(source):
                raise FileNotFoundError(f"evaluation file {source} does not exist")
            name = source_name(source)
            if named.setdefault(name, source) != source:
                raise ValueError(f"{named[name]} and {source} would both be reported and "
                                 f"written as {name!r}; evaluate them separately")

    @abc.abstractmethod
    def evaluate_outputs(self, source, outputs, output_dir=None):
        """Official metrics of `source` from the model's `outputs` (and, with
        `output_dir`, its prediction files)."""

    # The key of `evaluate_model`'s result that model selection maximises.
    main_metric_name = "accuracy"

    @property
    def main_metric(self):
        """`main_metric_name`, prefixed with the first source when several are evaluated."""
        sources = self.eval_sources
        if len(sources) > 1:
            return f"{source_name(sources[0])}/{self.main_metric_name}"
        return self.main_metric_name

    # -- loss and metrics --------------------------------------------------------

    # `metric_sums` returns these: the summed loss, the hits of the training
    # accuracy, what both are averaged over, and the real (unpadded) tokens.
    sum_keys = ("loss_sum", "correct", "count", "tokens")

    def loss_count(self, labels):
        """What this replica's loss is averaged over (examples; scored words for NER)."""
        return self.example_count(labels, next(iter(labels)))

    def loss_denominators(self, labels):
        """This replica's share of the normaliser; the trainer sums it over replicas."""
        return {"count": self.loss_count(labels)}

    def compute_loss(self, labels, outputs, inputs, denominators):
        """(this replica's share of the global mean loss, metric sums)."""
        sums = self.metric_sums(labels, outputs, inputs)
        return sums["loss_sum"] / tf.maximum(denominators["count"], 1.0), sums

    def batch_examples(self, inputs, labels):
        """Rows, or with packed rows the examples they hold."""
        if not row_packing.is_packed(self.data):
            return super().batch_examples(inputs, labels)
        return packing.sequence_count(inputs["padding_mask"])

    @staticmethod
    def example_count(labels, key):
        return tf.cast(tf.shape(labels[key])[0], tf.float32)

    @staticmethod
    def token_count(inputs):
        # > 0: packed rows number their sequences in the mask.
        return tf.reduce_sum(tf.cast(inputs["padding_mask"] > 0, tf.float32))

    def metrics(self, sums):
        """Training loss and accuracy from summed `metric_sums` (Python floats)."""
        count = max(float(sums["count"]), 1e-9)
        return {"loss": float(sums["loss_sum"]) / count,
                "accuracy": float(sums["correct"]) / count}

    def task_record(self):
        """The record of this run's model: `kind`, the length, and `record_fields()`."""
        return TaskRecord(kind=self.kind, name=self.name,
                          max_seq_length=self.data.max_seq_length, **self.record_fields())

    @abc.abstractmethod
    def record_fields(self):
        """The task record's fields for this task's kind (see `task_record.KIND_FIELDS`)."""


# Extensions dropped from a file's name in metric names and output files
# (CoNLL's eng.testa / eng.testb keep theirs: it is what tells them apart).
_DATA_EXTENSIONS = (".json", ".jsonl", ".csv", ".tsv", ".txt")


def source_name(source):
    """A short name for an evaluation source: a split name, or a file's name."""
    name = os.path.basename(source)
    stem, extension = os.path.splitext(name)
    return stem if extension in _DATA_EXTENSIONS else name


def output_path(output_dir, name):
    storage.makedirs(output_dir, exist_ok=True)
    return os.path.join(output_dir, name)
