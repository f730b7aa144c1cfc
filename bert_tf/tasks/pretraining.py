"""The pretraining task: masked LM (+ next-sentence prediction) on a text corpus.

The math of one replica: the model, the losses and the metric sums. The
trainer (`bert_tf.training.trainer`) owns everything else.

Losses are normalised over the *global* batch: the masked-LM loss is the
sum of the weighted cross-entropies divided by the sum of the weights of all
replicas (and all gradient-accumulation micro-batches), the NSP loss the sum
over the number of examples in the global batch. Summing the replicas' losses
(and gradients) then gives exactly the loss of one device holding the whole
batch, whatever the replica count.
"""

import collections
import dataclasses
import functools

import tensorflow as tf

from bert_tf import config as config_lib
from bert_tf.checkpoints import assign, loading, weight_map
from bert_tf.checkpoints.task_record import TaskRecord
from bert_tf.data import packing
from bert_tf.data import pretraining as pretraining_data
from bert_tf.layers import fast_ops
from bert_tf.models.bert_encoder import BertEncoder
from bert_tf.models.bert_pretrainer import BertPretrainer
from bert_tf.models.encoder_config import EncoderConfig
from bert_tf.tasks import row_packing
from bert_tf.tasks.base import (
    Task,
    check_data_fits_encoder,
    check_encoder_fits,
    encoder_config_differences,
    experiment_class,
)
from bert_tf.text.masking import MaskingFractions
from bert_tf.text.tokenizer import BertTokenizer


@dataclasses.dataclass
class PretrainingModelConfig:
    """The pretrainer: an encoder plus the MLM head and, optionally, NSP."""

    encoder: EncoderConfig = dataclasses.field(default_factory=EncoderConfig)
    use_nsp: bool = True


# BERT's data options, stated once (`PretrainingOptions`' defaults) and used as the
# config's defaults below.
_BERT_DATA = pretraining_data.PretrainingOptions()


@config_lib.retired_keys(row_packing.RETIRED_KEYS)
@dataclasses.dataclass
class PretrainingDataConfig:
    """Corpus, vocabulary and BERT's data options (see `bert_tf.data.pretraining`)."""

    # Globs of corpus files: one sentence per line, blank lines between documents.
    train_files: list[str] = dataclasses.field(default_factory=list)
    # Globs of held-out files for evaluation; when empty, every
    # `eval_holdout_every`-th document of `train_files` is held out instead.
    eval_files: list[str] = dataclasses.field(default_factory=list)
    eval_holdout_every: int = 100
    vocab_file: str = ""
    lower_case: bool = True
    max_seq_length: int = _BERT_DATA.max_seq_length
    max_predictions_per_seq: int = _BERT_DATA.max_predictions_per_seq
    masked_lm_prob: float = _BERT_DATA.masked_lm_prob
    # A masking rate that moves linearly over training: masked_lm_prob at the first step,
    # masked_lm_prob_end from step masked_lm_prob_steps on (0: trainer.train_steps), in
    # between by linear interpolation. 0: no schedule, masked_lm_prob throughout.
    # max_predictions_per_seq must leave room for the higher of the two rates.
    masked_lm_prob_end: float = 0.0
    masked_lm_prob_steps: int = 0
    # What a selected token becomes (BERT: 80 % [MASK], 10 % unchanged, 10 %
    # random); in [0, 1], summing to 1.
    mask_token_fraction: float = _BERT_DATA.masking_fractions.mask
    keep_token_fraction: float = _BERT_DATA.masking_fractions.keep
    random_token_fraction: float = _BERT_DATA.masking_fractions.random
    short_seq_prob: float = _BERT_DATA.short_seq_prob
    # Instances are BERT's sentence pairs ([CLS] A [SEP] B [SEP], B a random
    # span for half of them) with or without the NSP loss (model.use_nsp), so
    # dropping NSP changes the loss only, as in the paper's "No NSP" row.
    # False: single segments of consecutive text (RoBERTa's input; no NSP).
    sentence_pairs: bool = _BERT_DATA.nsp
    whole_word_masking: bool = _BERT_DATA.whole_word_masking
    documents_per_window: int = _BERT_DATA.documents_per_window
    shuffle_buffer_size: int = _BERT_DATA.shuffle_buffer_size
    # Most instances per row (bert_tf.tasks.row_packing; 1: one per row): each is
    # still encoded, masked and scored as if alone in its row; batches count rows.
    # The packaged configs set 3.
    max_sequences_per_row: int = row_packing.DEFAULT_MAX_SEQUENCES_PER_ROW
    # Instances assigned to rows at a time (first-fit within the window).
    packing_window: int = row_packing.DEFAULT_WINDOW
    seed: int = _BERT_DATA.seed
    # Held-out evaluation at other settings than training (0: the training value), so
    # runs that train at another length or masking rate (a shorter first phase, a
    # higher rate) are scored on the same held-out batches as the paper's recipe.
    eval_max_seq_length: int = 0
    eval_max_predictions_per_seq: int = 0
    eval_masked_lm_prob: float = 0.0
    # The held-out batches' seed; None: data.seed + 1. Set, runs of other data seeds
    # (data order, pairs and masks) are scored on the same held-out batches.
    eval_seed: int | None = None


EVAL_SETTING_FIELDS = ("eval_max_seq_length", "eval_max_predictions_per_seq",
                       "eval_masked_lm_prob")

MASKING_FRACTION_KEYS = ("data.mask_token_fraction", "data.keep_token_fraction",
                         "data.random_token_fraction")


def masking_schedule(data: PretrainingDataConfig,
                     train_steps: int) -> pretraining_data.MaskingSchedule | None:
    """The training masking schedule of a data config (None: a fixed rate).

    Args:
      data: the data config.
      train_steps: the run's `trainer.train_steps` (the schedule's length when
        `data.masked_lm_prob_steps` is 0).
    """
    if not data.masked_lm_prob_end:
        return None
    return pretraining_data.MaskingSchedule(
        start=data.masked_lm_prob, end=data.masked_lm_prob_end,
        steps=data.masked_lm_prob_steps or train_steps)


def training_masked_lm_prob_max(data: PretrainingDataConfig) -> float:
    """The highest rate a training row is masked at (what packed buffers are sized for)."""
    return max(data.masked_lm_prob, data.masked_lm_prob_end)


def masking_fractions(data: PretrainingDataConfig) -> MaskingFractions:
    """The `MaskingFractions` of a data config."""
    return MaskingFractions(mask=data.mask_token_fraction, keep=data.keep_token_fraction,
                            random=data.random_token_fraction)


PretrainingExperiment = experiment_class(
    "PretrainingExperiment", "pretraining", PretrainingModelConfig, PretrainingDataConfig,
    "A whole pretraining run: one YAML file in `configs/pretrain/`.")


@dataclasses.dataclass(frozen=True)
class ConstantGuess:
    """A label given as the answer to every held-out example, and its accuracy."""

    label: int  # a token id for masked LM; for NSP 0 (is next) or 1 (random)
    accuracy: float


def _nsp_weights(labels):
    """float32 weights of the NSP labels: 1 per sequence (packed rows: 0 for empty slots)."""
    if "next_sentence_weights" in labels:
        return labels["next_sentence_weights"]
    return tf.ones_like(labels["next_sentence_labels"], tf.float32)


def _without_next_sentence_features(features):
    """Pipeline features without the NSP labels (and, packed, their weights and positions)."""
    return {name: value for name, value in features.items()
            if not name.startswith("next_sentence_")}


class PretrainingTask(Task):
    """Masked LM (+ NSP) pretraining from raw text, tokenized in the input pipeline.

    Evaluates in graph on held-out documents; its corpus is streamed, so it
    has no epoch size (`trainer.train_steps`, not `train_epochs`).
    """

    config_class = PretrainingExperiment
    name = "pretraining"
    # The evaluation settings change no training batch: a resumed run may change them.
    EVALUATION_DATA_FIELDS = (Task.EVALUATION_DATA_FIELDS | frozenset(EVAL_SETTING_FIELDS)
                              | {"eval_seed"})

    @property
    def model_config(self):
        return self.experiment.model

    @property
    def data(self):
        return self.experiment.data

    # -- checks and metadata -------------------------------------------------

    def validate(self):
        """Eager checks that name the config key at fault, before anything is built."""
        data, encoder = self.data, self.model_config.encoder
        if not data.train_files:
            raise ValueError("data.train_files is empty: set it in the config or with "
                             "--set 'data.train_files=[path/*.txt]'")
        if not data.vocab_file:
            raise ValueError("data.vocab_file is not set")
        contract = check_data_fits_encoder(data, encoder)
        if not data.eval_files and data.eval_holdout_every == 1:
            raise ValueError("data.eval_holdout_every must be 0 (no held-out documents) or >= 2")
        masking_fractions(data).check(MASKING_FRACTION_KEYS)
        self._validate_masking_schedule()
        self._validate_eval_settings()
        if self.model_config.use_nsp and not data.sentence_pairs:
            raise ValueError("model.use_nsp=true needs sentence pairs, but "
                             "data.sentence_pairs=false builds single segments: set "
                             "model.use_nsp=false or data.sentence_pairs=true")
        row_packing.check(data)
        self._tokenizer_contract = contract

    def _validate_eval_settings(self):
        data, encoder = self.data, self.model_config.encoder
        for name in EVAL_SETTING_FIELDS:
            if getattr(data, name) < 0:
                raise ValueError(f"data.{name} must be >= 0 (0: the training value), got "
                                 f"{getattr(data, name)}")
        length, predictions, _ = self.eval_settings()
        if length > encoder.max_position_embeddings:
            raise ValueError(f"data.eval_max_seq_length ({length}) exceeds "
                             f"model.encoder.max_position_embeddings "
                             f"({encoder.max_position_embeddings})")
        if predictions > length:
            raise ValueError(f"data.eval_max_predictions_per_seq ({predictions}) exceeds the "
                             f"evaluation's sequence length ({length})")
        if data.eval_masked_lm_prob > 1:
            raise ValueError(f"data.eval_masked_lm_prob must be in [0, 1], got "
                             f"{data.eval_masked_lm_prob}")

    def _validate_masking_schedule(self):
        data = self.data
        if not 0.0 <= data.masked_lm_prob_end < 1.0:
            raise ValueError(f"data.masked_lm_prob_end must be in [0, 1) (0: no schedule), got "
                             f"{data.masked_lm_prob_end}")
        if data.masked_lm_prob_steps < 0:
            raise ValueError(f"data.masked_lm_prob_steps must be >= 0 (0: "
                             f"trainer.train_steps), got {data.masked_lm_prob_steps}")
        if data.masked_lm_prob_steps and not data.masked_lm_prob_end:
            raise ValueError("data.masked_lm_prob_steps is set but data.masked_lm_prob_end is 0 "
                             "(no schedule): set the end rate too")

    def eval_settings(self) -> tuple[int, int, float]:
        """(max_seq_length, max_predictions_per_seq, masked_lm_prob) of the held-out batches.

        Unset (0) settings are the training ones; under a masking schedule, the rate is
        the one training ends at (`data.masked_lm_prob_end`).
        """
        data = self.data
        return (data.eval_max_seq_length or data.max_seq_length,
                data.eval_max_predictions_per_seq or data.max_predictions_per_seq,
                data.eval_masked_lm_prob or data.masked_lm_prob_end or data.masked_lm_prob)

    @property
    def eval_seed(self) -> int:
        """The held-out batches' seed: `data.eval_seed`, else `data.seed` + 1."""
        return self.data.seed + 1 if self.data.eval_seed is None else self.data.eval_seed

    def input_differences(self, old, new):
        """The base class's, and `trainer.train_steps` when it sets the length of the
        masking schedule (it decides every later batch's rate)."""
        differences = super().input_differences(old, new)
        if (new.data.masked_lm_prob_end and not new.data.masked_lm_prob_steps
                and old.trainer.train_steps != new.trainer.train_steps):
            differences["trainer.train_steps"] = (old.trainer.train_steps,
                                                  new.trainer.train_steps)
        return differences

    @property
    def vocab_file(self):
        return self.data.vocab_file

    def task_record(self):
        """A pretrainer served at the pretraining sequence length."""
        return TaskRecord(kind="pretrainer", name=self.name,
                          max_seq_length=self.data.max_seq_length)

    # -- model ---------------------------------------------------------------

    def build_model(self, dtype=None):
        """The `BertPretrainer`; call under the strategy's scope."""
        encoder = BertEncoder.from_encoder_config(self.model_config.encoder, dtype=dtype)
        return BertPretrainer(encoder, use_nsp=self.model_config.use_nsp,
                              packed=row_packing.is_packed(self.data))

    def initialize(self, model, path):
        """Loads pretrained weights (ours, Google TF1, Hugging Face, Model Garden) into `model`.

        The checkpoint's encoder must have the same shape and activation as
        the configured one; the heads are taken when present.
        """
        result = loading.load(path, "pretrainer", use_nsp=self.model_config.use_nsp,
                              vocab_file=self.data.vocab_file, lower_case=self.data.lower_case)
        check_encoder_fits(result.model.encoder.encoder_config, model.encoder.encoder_config,
                           path)
        arrays = {slot.name: slot.variable.numpy()
                  for slot in weight_map.model_slots(result.model)}
        loaded = assign.assign_to_slots(weight_map.model_slots(model), arrays,
                                        f"{result.format} checkpoint {path}",
                                        allow_missing=result.initialised)
        return loaded, result.initialised

    def model_differences(self, old, new):
        """`{key: (old, new)}` of model fields a resumed run cannot change."""
        differences = {f"model.encoder.{key}": values for key, values
                       in encoder_config_differences(old.encoder, new.encoder).items()}
        if old.use_nsp != new.use_nsp:
            differences["model.use_nsp"] = (old.use_nsp, new.use_nsp)
        return differences

    # -- data ----------------------------------------------------------------

    @functools.cached_property
    def _tokenizer(self):
        # One for every pipeline of the run (training, evaluation, each input context):
        # building its WordPiece tables from the vocabulary takes seconds.
        return BertTokenizer(self.data.vocab_file, lower_case=self.data.lower_case)

    def _dataset(self, input_context, batch_size, evaluation, seed):
        data = self.data
        tokenizer = self._tokenizer
        holdout = 0 if data.eval_files else data.eval_holdout_every
        files = data.eval_files if (evaluation and data.eval_files) else data.train_files
        length, predictions, masked_lm_prob = (
            self.eval_settings() if evaluation
            else (data.max_seq_length, data.max_predictions_per_seq, data.masked_lm_prob))
        # Evaluation is at a fixed rate, whatever schedule training follows.
        schedule = (None if evaluation
                    else masking_schedule(data, self.experiment.trainer.train_steps))
        options = pretraining_data.PretrainingOptions(
            max_seq_length=length, max_predictions_per_seq=predictions,
            masked_lm_prob=masked_lm_prob, masking_schedule=schedule,
            short_seq_prob=data.short_seq_prob,
            nsp=data.sentence_pairs, whole_word_masking=data.whole_word_masking,
            masking_fractions=masking_fractions(data), seed=seed,
            documents_per_window=data.documents_per_window,
            shuffle_buffer_size=data.shuffle_buffer_size,
            packing=row_packing.packing_options(data), holdout_every=holdout)
        dataset = pretraining_data.pretraining_dataset(
            files, tokenizer, data.vocab_file, batch_size=batch_size, options=options,
            num_epochs=None, input_context=input_context, held_out=evaluation)
        if data.sentence_pairs and not self.model_config.use_nsp:
            # Pairs without the NSP loss: the features of the pipeline's nsp=False.
            dataset = dataset.map(_without_next_sentence_features)
        return dataset.map(pretraining_data.to_model_inputs)

    def train_dataset(self, input_context, global_batch_size):
        """Endless (inputs, labels) batches for one input pipeline."""
        return self._dataset(input_context, global_batch_size, evaluation=False,
                             seed=self.data.seed)

    @property
    def has_eval_data(self):
        return bool(self.data.eval_files or self.data.eval_holdout_every)

    def eval_dataset(self, input_context, global_batch_size):
        """Endless held-out batches, the same in every run of one `eval_seed`."""
        return self._dataset(input_context, global_batch_size, evaluation=True,
                             seed=self.eval_seed)

    def constant_guesses(self, batch_size: int, steps: int) -> dict[str, ConstantGuess]:
        """The floor a model must beat: the best constant answer on the held-out batches.

        Counts the labels of the first `steps` held-out batches of `batch_size`,
        the batches the trainer evaluates on, and returns for `mlm_accuracy`
        (and `nsp_accuracy` with NSP) the label that is right most often and
        the accuracy of always answering it.

        Args:
          batch_size: the evaluation batch size (`trainer.eval_batch_size` or,
            when 0, `trainer.global_batch_size`).
          steps: the number of held-out batches (`trainer.eval_steps`).
        """
        masked_tokens, next_sentence = collections.Counter(), collections.Counter()
        for _, labels in self.eval_dataset(None, batch_size).take(steps):
            counted = labels["masked_lm_weights"].numpy() > 0  # [B, P]
            masked_tokens.update(labels["masked_lm_ids"].numpy()[counted].tolist())
            if "next_sentence_labels" in labels:
                counted = _nsp_weights(labels).numpy() > 0  # [B] or packed [B, K]
                next_sentence.update(labels["next_sentence_labels"].numpy()[counted].tolist())
        guesses = {}
        for metric, counts in (("mlm_accuracy", masked_tokens),
                               ("nsp_accuracy", next_sentence)):
            if counts:
                label, hits = counts.most_common(1)[0]
                guesses[metric] = ConstantGuess(label, hits / counts.total())
        return guesses

    # -- loss and metrics ----------------------------------------------------

    def loss_denominators(self, labels):
        """This replica's share of the normalisers; the trainer sums them over replicas."""
        denominators = {"mlm": tf.reduce_sum(labels["masked_lm_weights"])}
        if "next_sentence_labels" in labels:
            denominators["nsp"] = tf.reduce_sum(_nsp_weights(labels))
        return denominators

    def batch_examples(self, inputs, labels):
        """Sequence-pair instances: one per row, or each one of a packed row."""
        return packing.sequence_count(inputs["padding_mask"])

    @property
    def sum_keys(self):
        """The keys of `metric_sums`."""
        keys = ("mlm_loss_sum", "mlm_correct", "mlm_weight", "tokens")
        if self.model_config.use_nsp:
            keys += ("nsp_loss_sum", "nsp_correct", "nsp_count")
        return keys

    def metric_sums(self, labels, outputs, inputs):
        """Sums from which `metrics` computes the loss and accuracies (float32 scalars)."""
        weights = labels["masked_lm_weights"]  # [B, P]
        mlm_logits = tf.cast(outputs["mlm_logits"], tf.float32)  # [B, P, V]
        mlm_ids = labels["masked_lm_ids"]
        # The fast kernel: same values as TF's fused op, about half the time on
        # [B * P, V] logits (see `fast_ops.sparse_softmax_cross_entropy`).
        mlm_xent = fast_ops.sparse_softmax_cross_entropy(mlm_ids, mlm_logits)  # [B, P]
        mlm_hits = tf.cast(tf.equal(tf.argmax(mlm_logits, -1, output_type=tf.int32), mlm_ids),
                           tf.float32)
        sums = {
            "mlm_loss_sum": tf.reduce_sum(mlm_xent * weights),
            "mlm_correct": tf.reduce_sum(mlm_hits * weights),
            "mlm_weight": tf.reduce_sum(weights),
            # padding_mask numbers the sequences of packed rows: > 0 is a real token.
            "tokens": tf.reduce_sum(tf.cast(inputs["padding_mask"] > 0, tf.float32)),
        }
        if "nsp_logits" in outputs:
            # [B] and [B, 2], or per slot of packed rows [B, K] and [B, K, 2].
            nsp_labels = labels["next_sentence_labels"]
            nsp_logits = tf.cast(outputs["nsp_logits"], tf.float32)
            nsp_weights = _nsp_weights(labels)
            nsp_xent = tf.nn.sparse_softmax_cross_entropy_with_logits(nsp_labels, nsp_logits)
            nsp_hits = tf.equal(tf.argmax(nsp_logits, -1, output_type=tf.int32), nsp_labels)
            sums.update({
                "nsp_loss_sum": tf.reduce_sum(nsp_xent * nsp_weights),
                "nsp_correct": tf.reduce_sum(tf.cast(nsp_hits, tf.float32) * nsp_weights),
                "nsp_count": tf.reduce_sum(nsp_weights),
            })
        return sums

    def compute_loss(self, labels, outputs, inputs, denominators):
        """(this replica's share of the global loss, metric sums)."""
        sums = self.metric_sums(labels, outputs, inputs)
        loss = sums["mlm_loss_sum"] / tf.maximum(denominators["mlm"], 1.0)
        if "nsp" in denominators:
            loss += sums["nsp_loss_sum"] / tf.maximum(denominators["nsp"], 1.0)
        return loss, sums

    def metrics(self, sums):
        """Loss and accuracy metrics from summed `metric_sums` (Python floats)."""
        def ratio(numerator, denominator):
            return float(sums[numerator]) / max(float(sums[denominator]), 1e-9)

        metrics = {"mlm_loss": ratio("mlm_loss_sum", "mlm_weight"),
                   "mlm_accuracy": ratio("mlm_correct", "mlm_weight")}
        loss = metrics["mlm_loss"]
        if "nsp_count" in sums:
            metrics["nsp_loss"] = ratio("nsp_loss_sum", "nsp_count")
            metrics["nsp_accuracy"] = ratio("nsp_correct", "nsp_count")
            loss += metrics["nsp_loss"]
        metrics["loss"] = loss
        return metrics

