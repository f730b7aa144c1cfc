"""Packing: several sequences per row, so a batch spends its compute on real tokens.

Sequences are grouped into rows of `max_seq_length` tokens in graph, inside
tf.data: a bounded window of sequences is assigned to rows first-fit (in
order, each sequence to the first row with room and fewer than
`max_per_row` sequences; Graphcore's packed-BERT study, arXiv 2107.02027,
finds 3 per row enough for about 99 % efficiency), and each row's slots are
then merged into one packed row. The assignment depends only on the
lengths, so it is deterministic, and a resumed pipeline recomputes it
exactly before skipping the rows already consumed.

A packed row numbers its sequences in the encoder's `padding_mask`
(1, 2, ... per token, 0 for padding); the encoder turns that into
block-diagonal attention and positions that restart in each sequence
(`bert_tf.layers.sequence_ids`).

Shape legend: W window (sequences), R rows of a window, K slots per row
(`max_per_row`), S max_seq_length, P / P' predictions per sequence / per row.
"""

import dataclasses

import numpy as np
import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class PackingOptions:
    """How sequences are packed into rows.

    Attributes:
      max_sequences_per_row: most sequences in one row (K).
      window: sequences assigned to rows at a time (first-fit within it).
    """

    max_sequences_per_row: int = 3
    window: int = 256

    def __post_init__(self):
        if self.max_sequences_per_row < 1:
            raise ValueError(f"max_sequences_per_row must be >= 1, got "
                             f"{self.max_sequences_per_row}")
        if self.window < self.max_sequences_per_row:
            raise ValueError(f"the packing window ({self.window}) must hold at least "
                             f"max_sequences_per_row ({self.max_sequences_per_row}) sequences")


def first_fit(lengths, capacity, max_per_row):
    """Assigns sequences, in order, to rows: each to the first row it fits.

    Args:
      lengths: int32 [W], every length in [1, capacity].
      capacity: tokens per row (S).
      max_per_row: most sequences a row takes (K).

    Returns:
      (row [W], slot [W], offset [W]) int32: the row of each sequence, its
      slot in the row (0, 1, ... in order of arrival) and its first token.
    """
    lengths = tf.convert_to_tensor(lengths, tf.int32)
    count = tf.shape(lengths)[0]
    empty = tf.zeros([count], tf.int32)

    def place(i, free, taken, row, slot, offset):
        length = lengths[i]
        fits = tf.logical_and(free >= length, taken < max_per_row)  # [W] (rows)
        # A row never used has all its room, so some row always fits.
        target = tf.cast(tf.argmax(tf.cast(fits, tf.int32)), tf.int32)
        at = [[target]]
        return (i + 1,
                tf.tensor_scatter_nd_sub(free, at, [length]),
                tf.tensor_scatter_nd_add(taken, at, [1]),
                tf.tensor_scatter_nd_update(row, [[i]], [target]),
                tf.tensor_scatter_nd_update(slot, [[i]], [taken[target]]),
                tf.tensor_scatter_nd_update(offset, [[i]], [capacity - free[target]]))

    _, _, _, row, slot, offset = tf.while_loop(
        lambda i, *_: i < count, place,
        (tf.constant(0), empty + capacity, empty, empty, empty, empty))
    return row, slot, offset


def count_rows(lengths, capacity, max_per_row, window):
    """How many rows `first_fit` makes of `lengths`, window by window (host side).

    Args:
      lengths: the sequences' lengths, in the order they are packed.
      capacity, max_per_row: see `first_fit`.
      window: sequences assigned at a time.
    """
    rows = 0
    lengths = np.asarray(lengths)
    for start in range(0, len(lengths), window):
        free, taken = [], []
        for length in lengths[start:start + window]:
            row = next((r for r, room in enumerate(free)
                        if room >= length and taken[r] < max_per_row), len(free))
            if row == len(free):
                free.append(capacity)
                taken.append(0)
            free[row] -= length
            taken[row] += 1
        rows += len(free)
    return rows


def to_slots(window, lengths, capacity, max_per_row):
    """Groups a window of sequences into rows of `max_per_row` slots.

    Args:
      window: dict of [W, ...] tensors, one entry per sequence.
      lengths: int32 [W], each sequence's real tokens.
      capacity, max_per_row: see `first_fit`.

    Returns:
      dict of [R, K, ...] tensors (empty slots zero-filled) plus
      `slot_lengths` int32 [R, K] (0 for an empty slot).
    """
    row, slot, _ = first_fit(lengths, capacity, max_per_row)
    num_rows = tf.reduce_max(row) + 1
    where = tf.stack([row, slot], axis=1)  # [W, 2]
    shape = tf.stack([num_rows, max_per_row])

    def scatter(values):
        target_shape = tf.concat([shape, tf.shape(values)[1:]], axis=0)
        return tf.scatter_nd(where, values, target_shape)  # [R, K, ...]

    slots = {name: scatter(values) for name, values in window.items()}
    slots["slot_lengths"] = scatter(lengths)
    return slots


def concat_slots(values, lengths, size):
    """The first `lengths[k]` entries of each slot, one after the other, zero-padded.

    Args:
      values: [K, N] per-slot entries.
      lengths: int32 [K], how many leading entries of each slot are real.
      size: length of the result (>= sum(lengths)).

    Returns:
      [size] the concatenated real entries followed by zeros.
    """
    real = tf.RaggedTensor.from_tensor(values, lengths=lengths).flat_values
    return tf.pad(real, [[0, size - tf.shape(real)[0]]])


def merge_example_slots(slots, max_seq_length, sequence_keys=()):
    """One packed fine-tuning row from a row of examples.

    Args:
      slots: dict of [K, ...] tensors: `token_ids`, `segment_ids`,
        `padding_mask` [K, S] (padding_mask 0/1), `slot_lengths` [K], the
        `sequence_keys` [K, S] (per-token labels) and any per-example
        values [K, ...] (labels), which pass through.
      max_seq_length: S.
      sequence_keys: per-token entries concatenated like the tokens.

    Returns:
      The row: `token_ids`, `segment_ids` [S], `padding_mask` [S] holding
      sequence indices, the `sequence_keys` [S], `cls_positions` [K] (each
      example's first token; 0 for an empty slot), `slot_weights` [K]
      (1.0 for an example, 0.0 for an empty slot) and the per-example values.
    """
    lengths = slots["slot_lengths"]  # [K]
    offsets = tf.cumsum(lengths, exclusive=True)
    occupied = lengths > 0
    sequence_index = tf.repeat(tf.range(1, tf.shape(lengths)[0] + 1), lengths)  # [sum L]
    row = {key: value for key, value in slots.items()
           if key not in ("slot_lengths", "padding_mask")}
    for key in ("token_ids", "segment_ids", *sequence_keys):
        row[key] = concat_slots(slots[key], lengths, max_seq_length)
    row["padding_mask"] = tf.pad(sequence_index,
                                 [[0, max_seq_length - tf.shape(sequence_index)[0]]])
    row["cls_positions"] = tf.where(occupied, offsets, 0)
    row["slot_weights"] = tf.cast(occupied, tf.float32)
    return row


def merge_pretraining_slots(slots, max_seq_length, max_predictions):
    """One packed pretraining row from a row of masked sequences.

    Args:
      slots: dict of [K, ...] tensors: `input_ids`, `segment_ids` [K, S];
        `masked_lm_positions`, `masked_lm_ids` [K, P] and
        `masked_lm_weights` [K, P] (float32) as masking returns them (real
        predictions first); optionally `next_sentence_labels` [K]; and
        `slot_lengths` [K].
      max_seq_length: S.
      max_predictions: P', the MLM buffer of the packed row (at least the
        row's total predictions).

    Returns:
      The features of `bert_tf.data.pretraining` for one row, with
      `input_mask` holding sequence indices and, with NSP,
      `next_sentence_labels`, `next_sentence_weights` and
      `next_sentence_positions` [K] (per slot; weight 0 for empty slots).
    """
    lengths = slots["slot_lengths"]  # [K]
    offsets = tf.cumsum(lengths, exclusive=True)  # [K]
    occupied = lengths > 0
    num_slots = tf.shape(lengths)[0]
    sequence_index = tf.repeat(tf.range(1, num_slots + 1), lengths)  # [sum L]
    packed = {
        "input_ids": concat_slots(slots["input_ids"], lengths, max_seq_length),
        "input_mask": tf.pad(sequence_index,
                             [[0, max_seq_length - tf.shape(sequence_index)[0]]]),
        "segment_ids": concat_slots(slots["segment_ids"], lengths, max_seq_length),
    }
    weights = slots["masked_lm_weights"]  # [K, P]
    predictions = tf.reduce_sum(tf.cast(weights > 0, tf.int32), axis=1)  # [K]
    # Positions move with their sequence: + the sequence's first token.
    positions = slots["masked_lm_positions"] + offsets[:, None]  # [K, P]
    packed["masked_lm_positions"] = concat_slots(positions, predictions, max_predictions)
    packed["masked_lm_ids"] = concat_slots(slots["masked_lm_ids"], predictions,
                                           max_predictions)
    packed["masked_lm_weights"] = concat_slots(weights, predictions, max_predictions)
    if "next_sentence_labels" in slots:
        packed["next_sentence_labels"] = slots["next_sentence_labels"]
        packed["next_sentence_weights"] = tf.cast(occupied, tf.float32)
        packed["next_sentence_positions"] = tf.where(occupied, offsets, 0)
    return packed


def max_packed_predictions(max_seq_length, max_per_row, max_predictions_per_seq,
                           masked_lm_prob):
    """P': the MLM buffer a packed row needs, never less than its predictions.

    A sequence of L tokens gets at most max(1, round(L * p)) <= L * p + 1
    predictions, so a row of at most S tokens in K sequences gets at most
    floor(S * p) + K, and never more than K * P.
    """
    # The epsilon keeps a product like 20.0 that floats give as 19.999... at 20.
    return min(max_per_row * max_predictions_per_seq,
               int(max_seq_length * masked_lm_prob + 1e-6) + max_per_row)


def pack_examples(examples, options, max_seq_length, max_predictions):
    """Packs a dataset of masked pretraining examples (e.g. read from TFRecords).

    Args:
      examples: unbatched feature dicts as `bert_tf.data.pretraining`
        yields them (`input_mask` 0/1).
      options: a `PackingOptions`.
      max_seq_length: S of the examples and of the rows.
      max_predictions: P' of the rows (see `max_packed_predictions`; K * P
        is always enough).

    Returns:
      A dataset of packed rows (see `merge_pretraining_slots`).
    """
    def assign(window):
        lengths = tf.reduce_sum(window["input_mask"], axis=1)  # [W]
        return to_slots(window, lengths, max_seq_length, options.max_sequences_per_row)

    def merge(slots):
        return merge_pretraining_slots(slots, max_seq_length, max_predictions)

    return examples.batch(options.window).map(assign).unbatch().map(merge)


def sequence_count(padding_mask):
    """Sequences in a batch of rows [B, S] (float32 scalar), packed or not.

    A row's `padding_mask` numbers its sequences 1..K (a plain row's 0/1 mask
    is the case K = 1), so its largest value is its sequence count.
    """
    return tf.reduce_sum(tf.cast(tf.reduce_max(padding_mask, axis=-1), tf.float32))
