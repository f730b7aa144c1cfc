"""Packs one or two token-id segments into BERT encoder inputs.

    [CLS] A [SEP]            (one segment)
    [CLS] A [SEP] B [SEP]    (two segments)

truncated to `max_seq_length` longest-first, exactly as google-research/bert's
`_truncate_seq_pair` (drop the last token of the longer segment, of B on a
tie, until the pair fits), then padded. Outputs are the encoder's inputs:
`token_ids`, `segment_ids`, `padding_mask`, int32 [B, max_seq_length].
"""

import tensorflow as tf

# The packed features, all [..., S].
SEQUENCE_KEYS = ("token_ids", "segment_ids", "padding_mask")


def trim_padding(features, sequence_keys=SEQUENCE_KEYS, multiple=8):
    """Cuts the last axis of `sequence_keys` to the batch's longest sequence.

    `features["padding_mask"]` ([B, S] or [B, C, S]; sequence indices in
    packed rows) gives the lengths; the cut length is rounded up to
    `multiple`, so kernels see a handful of shapes, but never exceeds S.

    Args:
      features: dict of tensors, `padding_mask` among them.
      sequence_keys: the keys whose last axis is the sequence.
      multiple: round the length up to a multiple of this.
    """
    mask = features["padding_mask"]
    # At least 1, so an empty batch keeps a valid (if unused) length.
    longest = tf.maximum(tf.reduce_max(tf.reduce_sum(tf.cast(mask > 0, tf.int32), axis=-1)), 1)
    length = tf.minimum((longest + multiple - 1) // multiple * multiple, tf.shape(mask)[-1])
    return {key: (value[..., :length] if key in sequence_keys else value)
            for key, value in features.items()}


def truncated_lengths(len_a, len_b, budget):
    """Lengths BERT's `_truncate_seq_pair` leaves, in closed form.

    The loop trims the longer segment (B on a tie) one token at a time, so
    once both are trimmed A keeps ceil(budget / 2) and B the rest; a segment
    shorter than its share is kept whole and the other gets the remainder.

    Args:
      len_a, len_b: int Tensors of the same shape (segment lengths).
      budget: scalar, the number of tokens both may keep together.

    Returns:
      (new_len_a, new_len_b).
    """
    budget = tf.cast(budget, len_a.dtype)
    fits = len_a + len_b <= budget
    keep_a = tf.minimum(len_a, tf.maximum(budget - len_b, (budget + 1) // 2))
    new_a = tf.where(fits, len_a, keep_a)
    new_b = tf.where(fits, len_b, budget - keep_a)
    return new_a, new_b


def _to_ragged(segment):
    """[B, (T)] int32 RaggedTensor from a ragged or dense batch."""
    if isinstance(segment, tf.RaggedTensor):
        if segment.ragged_rank > 1:
            # e.g. [B, (words), (pieces)]: the pieces in order.
            segment = segment.merge_dims(1, -1)
        return tf.cast(segment, tf.int32)
    return tf.RaggedTensor.from_tensor(tf.cast(segment, tf.int32))


def _keep_first(segment, lengths):
    """The first `lengths[b]` tokens of each row b."""
    positions = tf.ragged.range(segment.row_lengths())
    keep = positions < tf.cast(lengths, positions.dtype)[:, None]
    return tf.ragged.boolean_mask(segment, keep)


class SegmentPacker(tf.Module):
    """Builds {token_ids, segment_ids, padding_mask} from 1 or 2 segments.

    Args:
      max_seq_length: the longest packed sequence (>= 2; >= 3 for pairs);
        longer inputs are truncated to it.
      cls_id, sep_id, pad_id: ids of [CLS], [SEP] and [PAD].
      pad_to_multiple: None pads every batch to `max_seq_length`; a number
        m pads a batch only to its longest sequence rounded up to a multiple
        of m (at most `max_seq_length`), so short texts cost short batches.

    Call with one segment or a list/tuple of one or two. A segment is a
    batch (int RaggedTensor [B, (T)], deeper ragged ids are flattened per
    row, or a dense [B, T] with no padding) or a single example (1-D
    Tensor [T]); all segments of a call are batched or all are not.
    """

    def __init__(self, max_seq_length, cls_id, sep_id, pad_id=0, pad_to_multiple=None,
                 name=None):
        super().__init__(name=name)
        if pad_to_multiple is not None and pad_to_multiple < 1:
            raise ValueError(f"pad_to_multiple must be >= 1 or None, got {pad_to_multiple}")
        self.pad_to_multiple = pad_to_multiple
        if max_seq_length < 2:
            raise ValueError(
                f"max_seq_length must be >= 2 for [CLS] and [SEP], got {max_seq_length}"
            )
        self.max_seq_length = int(max_seq_length)
        self.cls_id = int(cls_id)
        self.sep_id = int(sep_id)
        self.pad_id = int(pad_id)

    @classmethod
    def from_tokenizer(cls, tokenizer, max_seq_length, pad_to_multiple=None, name=None):
        """A packer using the special ids of a `BertTokenizer`."""
        return cls(
            max_seq_length,
            cls_id=tokenizer.cls_id,
            sep_id=tokenizer.sep_id,
            pad_id=tokenizer.pad_id,
            pad_to_multiple=pad_to_multiple,
            name=name,
        )

    # No Python control flow on tensors: AutoGraph has nothing to convert (and
    # converting cost time on every trace).
    @tf.autograph.experimental.do_not_convert
    def __call__(self, segments):
        """Packs the segments; see the class docstring."""
        if not isinstance(segments, (list, tuple)):
            segments = [segments]
        if len(segments) not in (1, 2):
            raise ValueError(f"SegmentPacker takes 1 or 2 segments, got {len(segments)}")
        if len(segments) == 2 and self.max_seq_length < 3:
            raise ValueError(
                f"max_seq_length must be >= 3 for a segment pair, got {self.max_seq_length}"
            )
        unbatched = [
            not isinstance(s, tf.RaggedTensor) and tf.convert_to_tensor(s).shape.rank == 1
            for s in segments
        ]
        if any(unbatched) != all(unbatched):
            raise ValueError("segments must be all batched or all single examples")
        if all(unbatched):
            batch = [tf.convert_to_tensor(s)[None] for s in segments]
            packed = self._pack([_to_ragged(s) for s in batch])
            return {key: value[0] for key, value in packed.items()}
        return self._pack([_to_ragged(s) for s in segments])

    def _pack(self, segments):
        first = segments[0]
        batch_size = first.nrows()
        if len(segments) == 1:
            len_a = first.row_lengths()
            parts = [_keep_first(first, tf.minimum(len_a, self.max_seq_length - 2))]
        else:
            len_a, len_b = truncated_lengths(
                first.row_lengths(), segments[1].row_lengths(), self.max_seq_length - 3
            )
            parts = [_keep_first(first, len_a), _keep_first(segments[1], len_b)]

        def column(value):
            value = tf.constant(value, tf.int32)
            return tf.RaggedTensor.from_tensor(tf.fill([batch_size, 1], value))

        cls_col, sep_col = column(self.cls_id), column(self.sep_id)
        pieces, types = [cls_col], [tf.zeros_like(cls_col)]
        for segment_id, part in enumerate(parts):
            pieces += [part, sep_col]
            types += [tf.ones_like(part) * segment_id, tf.ones_like(sep_col) * segment_id]
        token_ids = tf.concat(pieces, axis=1)
        segment_ids = tf.concat(types, axis=1)
        shape = [None, self.max_seq_length]
        features = {
            "token_ids": token_ids.to_tensor(self.pad_id, shape=shape),
            "segment_ids": segment_ids.to_tensor(0, shape=shape),
            "padding_mask": tf.ones_like(token_ids).to_tensor(0, shape=shape),
        }
        if self.pad_to_multiple is None:
            return features
        return trim_padding(features, SEQUENCE_KEYS, self.pad_to_multiple)
