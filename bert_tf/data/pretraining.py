"""The dynamic pretraining pipeline: raw text to batches of MLM (+ NSP) features, in graph.

    corpus files --document_dataset--> documents (1-D tf.string, one sentence each)
      --ragged_batch(documents_per_window)--> windows [D, (sentences)]
      --tokenize, make_instances--> padded [CLS] A [SEP] B [SEP] instances
      --unbatch, seeded shuffle, enumerate--> (example index, instance)
      --mask_tokens--> features --batch--> [B, S] / [B, P] / [B]

Everything runs in tf.data ops (no `tf.py_function`, no Python per example),
so the pipeline runs on TPU hosts and parallelises over the cores.

Determinism: every random draw is stateless. Pair construction is keyed by
(seed, epoch, input pipeline, window index), the instance shuffle by (seed,
epoch, input pipeline) and the masks by (seed, epoch, input pipeline, example
index), where the example index counts the instances of this input pipeline
in the epoch, in output order. Hence the same seed gives the same batches in
every run, a different seed or epoch gives different pairs and masks (dynamic
masking: a fresh mask every epoch), and a run resumed with
`start_example=k` yields exactly the tail of an uninterrupted one (it
recomputes the windows, but skips the masking of the first k examples).
All parallel maps keep the default `deterministic=True`. The corpus files
are read in their sorted order every epoch (a file shuffle seeded per epoch
would need a tensor seed in `corpus.document_dataset`); the window pairing
and the block-wise instance shuffle mix the documents.

A masking schedule (`PretrainingOptions.masking_schedule`) makes the rate
a function of the training step: the rows are counted in output order from
the dataset's first row, across epochs, and row r of an input pipeline
belongs to step r // (its batch size). Only the rate moves: the masks are
still keyed as above, so a schedule whose start and end equal
`masked_lm_prob` gives exactly the batches of no schedule. The trainer
resumes through its iterator checkpoint, which holds the row count.

Feature names are the original BERT ones (`input_ids`, `input_mask`,
`segment_ids`, `masked_lm_positions`, `masked_lm_ids`, `masked_lm_weights`,
`next_sentence_labels`); `to_model_inputs` maps them to the model's inputs.
Without NSP (`PretrainingOptions.nsp=False`) `next_sentence_labels` is
omitted, so a task cannot train the NSP head on constant labels by mistake.

Shape legend: B batch, S max_seq_length, P max_predictions_per_seq.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

from bert_tf.data import corpus
from bert_tf.data import packing as packing_lib
from bert_tf.data.records import FEATURE_NAMES
from bert_tf.data.sentence_pairs import make_instances
from bert_tf.text.masking import (
    BERT_FRACTIONS,
    DynamicMasker,
    MaskingFractions,
    VocabInfo,
    read_vocab,
    vocab_info_from_tokens,
)

# Tags folded into the seed, one per independent stream of draws.
_PAIRS_TAG = 11
_SHUFFLE_TAG = 12
_MASK_TAG = 13


@dataclasses.dataclass(frozen=True)
class MaskingSchedule:
    """A masking rate moving linearly from `start` to `end` over `steps` training steps.

    At step k (counted from 0) the rate is start + (end - start) * min(k, steps) / steps,
    as a linear learning-rate decay is; after `steps` it stays at `end`.

    Attributes:
      start: the rate of the first step, in (0, 1).
      end: the rate from step `steps` on, in (0, 1).
      steps: the steps the rate takes to get from `start` to `end` (>= 1).

    Raises:
      ValueError: on construction, for a rate outside (0, 1) or `steps` < 1.
    """

    start: float
    end: float
    steps: int

    def __post_init__(self):
        for name in ("start", "end"):
            if not 0.0 < getattr(self, name) < 1.0:
                raise ValueError(f"masking schedule {name} must be in (0, 1), got "
                                 f"{getattr(self, name)}")
        if self.steps < 1:
            raise ValueError(f"masking schedule steps must be >= 1, got {self.steps}")

    @property
    def max_rate(self) -> float:
        """The highest rate of the schedule: what the prediction buffers are sized for."""
        return max(self.start, self.end)

    def rate(self, step):
        """The rate at `step` (an int or an int64 tensor), as a float32 scalar tensor."""
        done = tf.cast(tf.minimum(tf.cast(step, tf.int64), self.steps), tf.float32)
        return self.start + (self.end - self.start) * done / float(self.steps)


@dataclasses.dataclass(frozen=True)
class PretrainingOptions:
    """What the pretraining examples are: BERT's data options, the seed, packing.

    The same options and seed give the same examples in every run; where an
    epoch starts, how it is batched and distributed are arguments of
    `pretraining_dataset` instead.

    Attributes:
      max_seq_length: tokens per sequence S, [CLS] and [SEP]s included.
      max_predictions_per_seq: most masked positions P per sequence.
      masked_lm_prob: fraction of a sequence's tokens selected for masking.
      masking_schedule: a `MaskingSchedule` the rate follows step by step
        instead (`masked_lm_prob` is then unused); needs a batch size. None:
        `masked_lm_prob` throughout.
      short_seq_prob: chance that an instance targets a shorter length than
        `max_seq_length` (as in BERT, to match shorter fine-tuning inputs).
      nsp: build sentence pairs with next-sentence labels; False builds
        single segments of consecutive text and leaves `next_sentence_labels` out.
      whole_word_masking: select whole words (all their "##" pieces); needs
        the vocab file.
      masking_fractions: what the selected tokens become (default BERT's
        80 % [MASK], 10 % kept, 10 % random).
      seed: the run's seed, folded into every random draw.
      documents_per_window: how many documents are grouped to draw the
        "random other document" of NotNext pairs from (see `sentence_pairs`).
      shuffle_buffer_size: instances are shuffled in blocks of this many
        (a seeded permutation per block); instances of one document are
        consecutive before it. 0 or 1 disables.
      packing: a `bert_tf.data.packing.PackingOptions` to pack several
        instances per row (see `bert_tf.data.packing`), or None (one instance
        per row).
      cycle_length: corpus files read at once (fixed for reproducibility).
      holdout_every: with k >= 2, every k-th document of an input pipeline is
        held out (see `corpus.holdout_split` and `pretraining_dataset`'s
        `held_out`); 0 holds none out.

    Raises:
      ValueError: on construction, for `documents_per_window` < 1,
        `max_predictions_per_seq` > `max_seq_length`, or `short_seq_prob`
        outside [0, 1].
    """

    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    masking_schedule: MaskingSchedule | None = None
    short_seq_prob: float = 0.1
    nsp: bool = True
    whole_word_masking: bool = False
    masking_fractions: MaskingFractions = BERT_FRACTIONS
    seed: int = 0
    documents_per_window: int = 64
    shuffle_buffer_size: int = 10000
    packing: packing_lib.PackingOptions | None = None
    cycle_length: int = 4
    holdout_every: int = 0

    def __post_init__(self):
        if self.documents_per_window < 1:
            raise ValueError(f"documents_per_window must be >= 1, got "
                             f"{self.documents_per_window}")
        if self.max_predictions_per_seq > self.max_seq_length:
            raise ValueError(f"max_predictions_per_seq={self.max_predictions_per_seq} exceeds "
                             f"max_seq_length={self.max_seq_length}")
        if not 0.0 <= self.short_seq_prob <= 1.0:
            raise ValueError(f"short_seq_prob must be in [0, 1], got {self.short_seq_prob}")

    @property
    def sizing_masked_lm_prob(self) -> float:
        """The highest rate any row is masked at (what packed buffers are sized for)."""
        return (self.masked_lm_prob if self.masking_schedule is None
                else self.masking_schedule.max_rate)


def _fold(seed, *values):
    """Folds integers (Python or scalar tensors) into a stateless seed [2]."""
    for value in values:
        seed = tf.random.experimental.stateless_fold_in(seed, tf.cast(value, tf.int64))
    return seed


def vocab_for_tokenizer(tokenizer, vocab_file=None):
    """The `VocabInfo` masking needs, checked against the tokenizer's special ids.

    The tokens (for the "##" table and the random-replacement ids) come from
    `vocab_file` when given, else from the tokenizer's `vocab` (a list of
    tokens, as `bert_tf.text.tokenizer.BertTokenizer` has). With neither,
    random replacement draws from every id but the special ones, and
    whole-word masking is unavailable.

    Raises:
      ValueError: the vocabulary disagrees with the tokenizer (size or special
        ids); the message names the vocab file.
    """
    special = {name: int(getattr(tokenizer, f"{name}_id"))
               for name in ("pad", "unk", "cls", "sep", "mask")}
    vocab_size = int(tokenizer.vocab_size)
    if vocab_file is not None:
        vocab, source = read_vocab(vocab_file), vocab_file
    elif getattr(tokenizer, "vocab", None) is not None:
        vocab, source = vocab_info_from_tokens(tokenizer.vocab), "the tokenizer's vocab"
    else:
        random_ids = np.setdiff1d(np.arange(vocab_size, dtype=np.int32),
                                  np.array(list(special.values()), np.int32))
        return VocabInfo(tokens=(), is_continuation=None, random_token_ids=random_ids,
                         **{f"{name}_id": value for name, value in special.items()})
    if vocab.vocab_size != vocab_size:
        raise ValueError(f"{source} has {vocab.vocab_size} tokens but the tokenizer's "
                         f"vocab_size is {vocab_size}")
    for name, value in special.items():
        if getattr(vocab, f"{name}_id") != value:
            raise ValueError(f"{source}: [{name.upper()}] has id "
                             f"{getattr(vocab, f'{name}_id')} but the tokenizer uses {value}")
    return vocab


def _tokenize_window(tokenizer, documents):
    """[D, (sentences)] tf.string -> int32 [D, (sentences), (tokens)]."""
    tokens = tokenizer.tokenize(documents.flat_values)  # [N, (T)] or [N, (words), (pieces)]
    if tokens.ragged_rank > 1:
        tokens = tokens.merge_dims(1, -1)
    tokens = tf.cast(tokens, tf.int32)
    return tf.RaggedTensor.from_row_splits(tokens, documents.row_splits, validate=False)


def pretraining_examples(documents, tokenizer, vocab_file=None,
                         options: PretrainingOptions | None = None, *, epoch=0,
                         pipeline_id=0, start_example=0, num_parallel_calls=tf.data.AUTOTUNE):
    """One epoch of unbatched pretraining examples from a dataset of documents.

    Args:
      documents: a `tf.data.Dataset` of 1-D `tf.string` documents (one
        sentence per element), e.g. from `corpus.document_dataset`.
      tokenizer: an object with `tokenize(1-D tf.string) -> RaggedTensor` of
        int ids [N, (T)], `vocab_size` and `pad_id`, `unk_id`, `cls_id`,
        `sep_id`, `mask_id` (e.g. `bert_tf.text.tokenizer.BertTokenizer`).
      vocab_file: the tokenizer's vocab.txt; optional when the tokenizer has
        a `vocab` token list; one of them is required for whole-word masking.
      options: the `PretrainingOptions` (None: the defaults); `cycle_length`
        and `holdout_every` do not apply (the documents are given).
      epoch: int or scalar int64 tensor, folded into every random draw.
      pipeline_id: index of this input pipeline (multi-host), folded into the draws.
      start_example: skip this many examples (resuming inside the epoch);
        with packing, this many packed rows.
      num_parallel_calls: parallelism of the maps (order stays deterministic).

    Returns:
      A `tf.data.Dataset` of feature dicts (see `FEATURE_NAMES`; packed rows
      add the features of `bert_tf.data.packing.merge_pretraining_slots`).
    """
    options = PretrainingOptions() if options is None else options
    if options.masking_schedule is not None:
        raise ValueError("a masking schedule needs training steps: use pretraining_dataset "
                         "with a batch_size")
    vocab, masker = _prepare(tokenizer, vocab_file, options)
    return _epoch_examples(
        documents, tokenizer, vocab, masker, options, epoch=epoch, start_example=start_example,
        pipeline_id=pipeline_id, num_parallel_calls=num_parallel_calls)


def _prepare(tokenizer, vocab_file, options):
    """Builds the vocabulary tables and the masker (eagerly, checking the vocab)."""
    vocab = vocab_for_tokenizer(tokenizer, vocab_file)
    if options.whole_word_masking and vocab.is_continuation is None:
        raise ValueError("whole_word_masking needs the vocab file (to know the '##' pieces)")
    masker = DynamicMasker.from_vocab(
        vocab, whole_word_masking=options.whole_word_masking,
        max_predictions_per_seq=options.max_predictions_per_seq,
        masked_lm_prob=options.sizing_masked_lm_prob, fractions=options.masking_fractions)
    return vocab, masker


# The stateless mask seed(s) of a row whose masking waits for its rate (a masking schedule).
_MASK_SEED = "mask_seed"


def _epoch_examples(documents, tokenizer, vocab, masker, options, *, epoch, start_example,
                    pipeline_id, num_parallel_calls, defer_masking=False):
    """The dataset of `pretraining_examples`, from validated inputs (traceable).

    With `defer_masking`, rows come unmasked with their mask seed(s) under `_MASK_SEED`,
    for `_mask_row` to mask once the row's rate is known.
    """
    max_seq_length, nsp = options.max_seq_length, options.nsp
    key = _fold(tf.constant([options.seed, 0], tf.int64), epoch, pipeline_id)
    pairs_key = _fold(key, _PAIRS_TAG)
    mask_key = _fold(key, _MASK_TAG)

    def window_instances(window_index, window):
        document_tokens = _tokenize_window(tokenizer, window)
        return make_instances(
            document_tokens, _fold(pairs_key, window_index), max_seq_length=max_seq_length,
            cls_id=vocab.cls_id, sep_id=vocab.sep_id, pad_id=vocab.pad_id,
            short_seq_prob=options.short_seq_prob, nsp=nsp)

    def seeded(example_index, instance):
        return {**instance, _MASK_SEED: _fold(mask_key, example_index)}

    windows = documents.ragged_batch(options.documents_per_window).enumerate()
    instances = windows.map(window_instances, num_parallel_calls=num_parallel_calls).unbatch()
    if options.shuffle_buffer_size > 1:
        instances = _shuffle_blocks(instances, options.shuffle_buffer_size,
                                    _fold(key, _SHUFFLE_TAG))
    if options.packing is not None:
        rows = _packed_rows(instances, mask_key, options.packing,
                            max_seq_length=max_seq_length, start_example=start_example)
    else:
        rows = instances.enumerate().skip(start_example).map(seeded)
    if defer_masking:
        return rows
    return rows.map(lambda row: _mask_row(row, masker, options),
                    num_parallel_calls=num_parallel_calls)


def _packed_rows(instances, mask_key, packing, *, max_seq_length, start_example):
    """Packed rows of unmasked instances, each slot with its mask seed: assign, then skip.

    Each instance keeps its index in the epoch, so its mask is the one the
    unpacked pipeline draws for it; rows are counted after packing, so
    `start_example` skips rows.
    """
    max_per_row = packing.max_sequences_per_row

    def assign(window):
        lengths = tf.reduce_sum(window["input_mask"], axis=1)  # [W]
        return packing_lib.to_slots(window, lengths, max_seq_length, max_per_row)

    def seeded(slots):
        seeds = [_fold(mask_key, slots["example_index"][k]) for k in range(max_per_row)]
        return {**slots, _MASK_SEED: tf.stack(seeds)}  # [K, 2]

    indexed = instances.enumerate().map(
        lambda index, instance: {**instance, "example_index": index})
    rows = indexed.batch(packing.window).map(assign).unbatch()
    return rows.skip(start_example).map(seeded)


def _mask_row(row, masker, options, masked_lm_prob=None):
    """The features of one row (`_epoch_examples` with `defer_masking`), masked.

    Args:
      row: an instance, or a packed row's slots, with its `_MASK_SEED`.
      masker: the `DynamicMasker`.
      options: the `PretrainingOptions`.
      masked_lm_prob: the row's rate (a float32 scalar tensor); None: the masker's.
    """
    row = dict(row)
    seed = row.pop(_MASK_SEED)
    if options.packing is None:
        features = {**row, **masker(row["input_ids"], seed, masked_lm_prob)}
        if not options.nsp:
            del features["next_sentence_labels"]
        return {name: features[name] for name in FEATURE_NAMES if name in features}
    max_per_row = options.packing.max_sequences_per_row
    max_predictions = packing_lib.max_packed_predictions(
        options.max_seq_length, max_per_row, masker.max_predictions_per_seq,
        masker.masked_lm_prob)
    masked = [masker(row["input_ids"][k], seed[k], masked_lm_prob) for k in range(max_per_row)]
    for name in masked[0]:
        row[name] = tf.stack([features[name] for features in masked])  # [K, ...]
    if not options.nsp:
        del row["next_sentence_labels"]
    return packing_lib.merge_pretraining_slots(row, options.max_seq_length, max_predictions)


def _shuffle_blocks(instances, block_size, key):
    """Permutes each block of `block_size` consecutive instances, statelessly.

    The permutation of block `i` is drawn from `fold(key, i)`, so the order
    depends only on the seed and the epoch. (`Dataset.shuffle` cannot take
    this tensor seed: under a global TensorFlow seed of 0 its seed handling
    calls `bool()` on the tensor.) Instances have fixed shapes [S], so a
    block batches densely.
    """
    def permute(block_index, block):
        size = tf.shape(block["input_ids"])[0]
        order = tf.random.experimental.stateless_shuffle(tf.range(size), _fold(key, block_index))
        return {name: tf.gather(value, order) for name, value in block.items()}

    return instances.batch(block_size).enumerate().map(permute).unbatch()


def pretraining_dataset(file_patterns, tokenizer, vocab_file=None, *, batch_size,
                        options: PretrainingOptions | None = None, epoch=0, num_epochs=1,
                        start_example=0, input_context=None, held_out=False,
                        drop_remainder=True, num_parallel_calls=tf.data.AUTOTUNE):
    """Batches of dynamically masked BERT pretraining features from corpus files.

    Args:
      file_patterns: glob(s) of corpus files in BERT's format (one sentence
        per line, blank line between documents); a pattern matching nothing
        raises ValueError here.
      tokenizer, vocab_file: see `pretraining_examples`.
      batch_size: the global batch size; with `input_context` each pipeline
        batches `input_context.get_per_replica_batch_size(batch_size)`.
        None yields unbatched examples. With `options.packing`, rows.
      options: the `PretrainingOptions` (None: the defaults).
      epoch: the first epoch (folded into all draws); resuming a run passes the
        epoch and the `start_example` where it stopped.
      num_epochs: epochs to produce, `epoch, epoch + 1, ...`; None repeats forever.
      start_example: examples (with packing, rows) of the first epoch to skip.
        With `options.masking_schedule`, `epoch` and `start_example` must be 0.
      input_context: optional `tf.distribute.InputContext`; files are sharded
        by `corpus.document_dataset` and the pipeline id is folded into the draws.
      held_out: with `options.holdout_every` >= 2, True yields only the
        held-out documents (an eval set), False only the others (the training set).
      drop_remainder: drop the last partial batch (static shapes for TPUs).
      num_parallel_calls: parallelism of the maps (order stays deterministic).

    Returns:
      A `tf.data.Dataset` of dicts: `input_ids`, `input_mask`, `segment_ids`
      int32 [B, S]; `masked_lm_positions`, `masked_lm_ids` int32 [B, P];
      `masked_lm_weights` float32 [B, P]; `next_sentence_labels` int32 [B]
      (0 IsNext, 1 NotNext; absent when `options.nsp` is False).
    """
    options = PretrainingOptions() if options is None else options
    if num_epochs is not None and num_epochs < 1:
        raise ValueError(f"num_epochs must be >= 1 or None, got {num_epochs}")
    per_replica = (None if batch_size is None
                   else input_context.get_per_replica_batch_size(batch_size)
                   if input_context is not None else batch_size)
    schedule = options.masking_schedule
    if schedule is not None and (per_replica is None or epoch != 0 or start_example != 0):
        raise ValueError("a masking schedule counts training steps from the first batch: it "
                         "needs a batch_size and starts at epoch 0, example 0 (a run resumes "
                         f"through its iterator checkpoint); got batch_size={batch_size}, "
                         f"epoch={epoch}, start_example={start_example}")
    def share_documents(context):
        documents = corpus.document_dataset(
            file_patterns, input_context=context, cycle_length=options.cycle_length,
            num_parallel_calls=num_parallel_calls)
        if options.holdout_every:
            documents = corpus.holdout_split(documents, options.holdout_every, held_out)
        return documents

    documents = share_documents(input_context)
    pipeline_id = input_context.input_pipeline_id if input_context is not None else 0
    # Eagerly, before the flat_map below traces anything.
    vocab, masker = _prepare(tokenizer, vocab_file, options)
    if input_context is not None and input_context.num_input_pipelines > 1:
        # An epoch without an example would make the endless epoch loop below spin.
        _check_shares(share_documents, input_context, file_patterns=file_patterns,
                      held_out=held_out)

    def one_epoch(current_epoch):
        skip = tf.where(current_epoch == epoch, tf.cast(start_example, tf.int64), 0)
        return _epoch_examples(
            documents, tokenizer, vocab, masker, options, epoch=current_epoch,
            start_example=skip, pipeline_id=pipeline_id, num_parallel_calls=num_parallel_calls,
            defer_masking=schedule is not None)

    def mask_on_schedule(row_index, row):
        # Row r of this pipeline is in the batch of step r // (rows per batch).
        rate = schedule.rate(row_index // per_replica)
        return _mask_row(row, masker, options, rate)

    last = np.iinfo(np.int64).max if num_epochs is None else epoch + num_epochs
    shapes = _feature_shapes(options)
    dataset = tf.data.Dataset.range(epoch, last).flat_map(one_epoch)
    if schedule is not None:
        dataset = dataset.enumerate().map(mask_on_schedule,
                                          num_parallel_calls=num_parallel_calls)
    dataset = dataset.map(lambda features: {name: tf.ensure_shape(value, shapes[name])
                                            for name, value in features.items()})
    if per_replica is not None:
        dataset = dataset.batch(per_replica, drop_remainder=drop_remainder)
    return dataset.prefetch(tf.data.AUTOTUNE)


# Up to this many input pipelines, each checks every pipeline's share (a corpus that
# cannot feed one worker then stops every worker at once); beyond, only its own.
_CHECK_EVERY_SHARE_UP_TO = 8


def _check_shares(share_documents, input_context, *, file_patterns, held_out):
    """Raises ValueError if an input pipeline's share of the corpus holds no document.

    Such a share makes no example in any epoch: its worker would loop over empty
    epochs for ever inside its first step while the others wait for it. (A share
    of one document makes examples every epoch.) Reads at most one document a share.
    """
    num_pipelines = input_context.num_input_pipelines
    pipelines = (range(num_pipelines) if num_pipelines <= _CHECK_EVERY_SHARE_UP_TO
                 else [input_context.input_pipeline_id])
    for pipeline_id in pipelines:
        context = tf.distribute.InputContext(num_pipelines, pipeline_id,
                                             input_context.num_replicas_in_sync)
        if int(share_documents(context).take(1).reduce(0, lambda count, _: count + 1)):
            continue
        files = corpus.list_files(file_patterns)
        shown = ", ".join(files[:3]) + (", ..." if len(files) > 3 else "")
        side = "held-out" if held_out else "training"
        raise ValueError(
            f"input pipeline {pipeline_id} of {num_pipelines} (one per worker) gets no "
            f"{side} document from its share of the {len(files)} corpus file(s) {shown}: "
            f"each worker needs documents of its own; give the corpus more documents, or at "
            f"least {num_pipelines} files (a worker then reads files of its own), or train on "
            "fewer workers")


def _feature_shapes(options):
    """The static shape of each feature of one example (or packed row).

    The pipeline's ragged and padding ops lose them; TPUs compile the train
    step for fixed shapes, so they are declared here.
    """
    length, predictions = [options.max_seq_length], [options.max_predictions_per_seq]
    nsp = []
    if options.packing is not None:
        per_row = options.packing.max_sequences_per_row
        predictions = [packing_lib.max_packed_predictions(
            options.max_seq_length, per_row, options.max_predictions_per_seq,
            options.sizing_masked_lm_prob)]
        nsp = [per_row]
    return {"input_ids": length, "input_mask": length, "segment_ids": length,
            "masked_lm_positions": predictions, "masked_lm_ids": predictions,
            "masked_lm_weights": predictions, "next_sentence_labels": nsp,
            "next_sentence_weights": nsp, "next_sentence_positions": nsp}


def to_model_inputs(features):
    """Maps BERT's feature names to the pretrainer's (inputs, labels) dicts.

    inputs: `token_ids`, `segment_ids`, `padding_mask`, `masked_lm_positions`;
    labels: `masked_lm_ids`, `masked_lm_weights` and, when present,
    `next_sentence_labels`. Packed rows add the input
    `cls_positions` (the feature `next_sentence_positions`) and the label
    `next_sentence_weights`.
    Usable as `dataset.map(to_model_inputs)`.
    """
    inputs = {
        "token_ids": features["input_ids"],
        "segment_ids": features["segment_ids"],
        "padding_mask": features["input_mask"],
        "masked_lm_positions": features["masked_lm_positions"],
    }
    labels = {"masked_lm_ids": features["masked_lm_ids"],
              "masked_lm_weights": features["masked_lm_weights"]}
    if "next_sentence_labels" in features:
        labels["next_sentence_labels"] = features["next_sentence_labels"]
    if "next_sentence_positions" in features:  # packed rows
        inputs["cls_positions"] = features["next_sentence_positions"]
        labels["next_sentence_weights"] = features["next_sentence_weights"]
    return inputs, labels
