"""Byte offsets into UTF-8 strings -> character (code point) offsets, in graph.

The tokenizer reports byte offsets; clients index Python strings by
character. A byte position p of string b maps to the number of characters
that start before p, so an end-exclusive byte span maps to an end-exclusive
character span. Invalid UTF-8 counts one character per replaced sequence,
like Python's `bytes.decode("utf-8", "replace")`.
"""

import tensorflow as tf

# Pads the per-string character starts: larger than any byte offset.
_NO_CHAR = tf.int64.max


def byte_to_char_offsets(strings, byte_offsets):
    """Character offsets of byte offsets.

    Args:
      strings: string Tensor [B].
      byte_offsets: int Tensor [B, K], byte positions into row b's string
        (0 <= offset <= its length in bytes).

    Returns:
      int32 Tensor [B, K].
    """
    _, char_starts = tf.strings.unicode_decode_with_offsets(
        strings, "UTF-8", errors="replace")  # [B, (C)] byte start of each char
    # [B, (C)] -> [B, C_max], padded past every offset so padding never counts.
    dense_starts = char_starts.to_tensor(default_value=_NO_CHAR)
    # searchsorted flattens both to [-1, last dim], which is ambiguous when a
    # last dim is 0 (empty batch, empty strings, no words): pad both by one column.
    dense_starts = tf.pad(dense_starts, [[0, 0], [0, 1]], constant_values=_NO_CHAR)
    byte_offsets = tf.cast(byte_offsets, tf.int64)
    padded_offsets = tf.pad(byte_offsets, [[0, 0], [0, 1]])  # [B, K + 1]
    chars = tf.searchsorted(dense_starts, padded_offsets, side="left", out_type=tf.int32)
    return chars[:, :-1]
