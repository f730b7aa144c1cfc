"""What the encoder derives from its `padding_mask`: attention bias and position ids.

The encoder's `padding_mask` is a *sequence index* per token: 0 for padding
and 1, 2, ... for the first, second, ... sequence of a packed row (several
examples in one row, each a contiguous run of tokens). An ordinary row is
the special case of one sequence (a 0/1 mask), for which both functions
give exactly what an unpacked BERT computes:

* `attention_bias`: a token attends to the tokens of its own sequence only
  (block-diagonal attention). Padding queries attend to every real token,
  as in BERT, so an ordinary row's padding outputs stay as they were.
* `position_ids`: positions restart at 0 at the first token of each
  sequence; padding keeps its absolute position.

Shape legend: B batch, S queries, T keys (S = T, the row length).
"""

from keras import ops

# BERT's additive mask value: large enough that exp() underflows to 0 in
# float32, small enough not to overflow when added to the scores.
MASK_BIAS = -10000.0


def _same_sequence(sequence_ids):
    """bool [B, S, T]: query s and key t carry the same sequence index."""
    return ops.equal(ops.expand_dims(sequence_ids, 2), ops.expand_dims(sequence_ids, 1))


def attention_bias(sequence_ids):
    """float32 [B, 1, S, T]: 0 where query s may attend to key t, `MASK_BIAS` elsewhere.

    Args:
      sequence_ids: int [B, S], 0 for padding, k >= 1 for the k-th sequence.
    """
    real_key = ops.expand_dims(ops.greater(sequence_ids, 0), 1)  # [B, 1, T]
    padding_query = ops.expand_dims(ops.equal(sequence_ids, 0), 2)  # [B, S, 1]
    allowed = ops.logical_and(
        real_key, ops.logical_or(_same_sequence(sequence_ids), padding_query))  # [B, S, T]
    bias = (1.0 - ops.cast(allowed, "float32")) * MASK_BIAS
    return ops.expand_dims(bias, 1)  # [B, 1, S, T]: one bias for every head


def position_ids(sequence_ids):
    """int32 [B, S]: each token's position within its own sequence (padding: absolute).

    Args:
      sequence_ids: int [B, S], 0 for padding, k >= 1 for the k-th sequence;
        each sequence a contiguous run of tokens.
    """
    absolute = ops.arange(ops.shape(sequence_ids)[1], dtype="int32")  # [S]
    earlier = ops.less(absolute[None, :], absolute[:, None])  # [S, T]: key t before query s
    # A token's position in its sequence: how many tokens of its sequence precede it.
    within = ops.sum(ops.cast(ops.logical_and(_same_sequence(sequence_ids), earlier[None]),
                              "int32"), axis=-1)  # [B, S]
    return ops.where(ops.greater(sequence_ids, 0), within,
                     ops.broadcast_to(absolute[None, :], ops.shape(within)))
