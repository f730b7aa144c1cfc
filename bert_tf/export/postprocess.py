"""Turns task-model logits into serving outputs (graph ops, float32).

Tensor legend: B batch, S sequence length, K classes/labels, C choices,
W words per text (padded).
"""

import tensorflow as tf

# Marks impossible spans; finite so that sums and comparisons stay defined.
_NEG = -1e30


def class_outputs(logits, label_names):
    """Classifier outputs from `logits` [B, K].

    Returns dict: logits, probabilities [B, K] float32; label_id [B] int32;
    label [B] string (the name of label_id).
    """
    logits = tf.cast(logits, tf.float32)
    label_id = tf.argmax(logits, axis=-1, output_type=tf.int32)
    return {
        "logits": logits,
        "probabilities": tf.nn.softmax(logits, axis=-1),
        "label_id": label_id,
        "label": tf.gather(tf.constant(label_names, tf.string), label_id),
    }


def regression_outputs(logits):
    """Regressor output `score` [B] from `logits` [B, 1]."""
    return {"score": tf.cast(logits, tf.float32)[:, 0]}


def choice_outputs(logits):
    """Multiple-choice outputs from `logits` [B, C]: logits, probabilities, choice_id."""
    logits = tf.cast(logits, tf.float32)
    return {
        "logits": logits,
        "probabilities": tf.nn.softmax(logits, axis=-1),
        "choice_id": tf.argmax(logits, axis=-1, output_type=tf.int32),
    }


def second_segment_mask(segment_ids, padding_mask):
    """bool [B, S]: the tokens of segment B, without the [SEP] that closes it.

    In `[CLS] A [SEP] B [SEP]` the closing [SEP] is the last real token of
    type 1, i.e. the one whose next position is not a real type-1 token.
    """
    in_b = tf.logical_and(tf.equal(segment_ids, 1), tf.equal(padding_mask, 1))  # [B, S]
    next_in_b = tf.pad(in_b[:, 1:], [[0, 0], [0, 1]])  # [B, S], shifted left
    return tf.logical_and(in_b, next_in_b)


def best_spans(start_logits, end_logits, allowed, max_answer_length):
    """The best answer span of each row, over the allowed token positions.

    A span (i, j) is valid when i and j are allowed, i <= j and
    j - i + 1 <= max_answer_length; its score is start_logits[i] +
    end_logits[j]. (BERT's run_squad searches only its 20 best starts and
    ends; this searches every valid pair, so it never scores lower.)

    Args:
      start_logits, end_logits: [B, S].
      allowed: bool [B, S].
      max_answer_length: Python int.

    Returns:
      dict: start_index, end_index int32 [B] (-1 when no span is valid),
      score float32 [B] (-1e30 when none), has_span bool [B].
    """
    start_logits = tf.cast(start_logits, tf.float32)
    end_logits = tf.cast(end_logits, tf.float32)
    length = tf.shape(start_logits)[1]
    scores = start_logits[:, :, None] + end_logits[:, None, :]  # [B, S(start), S(end)]
    positions = tf.range(length)
    span_length = positions[None, :] - positions[:, None] + 1  # [S, S], end - start + 1
    fits = tf.logical_and(span_length >= 1, span_length <= max_answer_length)
    valid = tf.logical_and(
        fits[None], tf.logical_and(allowed[:, :, None], allowed[:, None, :]))  # [B, S, S]
    scores = tf.where(valid, scores, _NEG)
    flat = tf.reshape(scores, [tf.shape(scores)[0], -1])  # [B, S * S]
    best = tf.argmax(flat, axis=-1, output_type=tf.int32)
    has_span = tf.reduce_any(valid, axis=[1, 2])
    return {
        "start_index": tf.where(has_span, best // length, -1),
        "end_index": tf.where(has_span, best % length, -1),
        "score": tf.reduce_max(flat, axis=-1),
        "has_span": has_span,
    }


def no_answer_scores(start_logits, end_logits):
    """SQuAD v2.0's null score: start + end logit of [CLS] (position 0), [B]."""
    return tf.cast(start_logits[:, 0], tf.float32) + tf.cast(end_logits[:, 0], tf.float32)
