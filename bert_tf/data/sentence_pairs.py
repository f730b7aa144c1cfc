"""BERT's sentence-pair (NSP) instances from a window of tokenized documents, in graph.

`make_instances` reproduces google-research/bert's `create_instances_from_document`
for every document of a window at once, with stateless random draws:

* target length `max_num_tokens` (max_seq_length - 3), or with probability
  `short_seq_prob` a uniform random length in [2, max_num_tokens];
* a chunk of consecutive sentences is accumulated until it reaches the target
  (or the document ends); segment A is its first `a_end` sentences, `a_end`
  uniform in [1, len(chunk) - 1];
* B is the rest of the chunk (IsNext, label 0) or, with probability 0.5,
  sentences from a random start in another document until B reaches the
  remaining target length (NotNext, label 1); the unused sentences of the
  chunk are then "put back" and start the next chunk;
* the pair is cut to `max_num_tokens` by BERT's `truncate_seq_pair`: one token
  at a time from the longer side, from its front or its back at random.

Approximations, by design (the corpus is streamed, never held in memory):

* The "other document" of a NotNext pair is drawn uniformly from the other
  documents of the same window (the `documents_per_window` documents batched
  together), not from the whole corpus. With one document in the window,
  B comes from the same document, as BERT does when it has a single document.
* The short target is drawn per chunk, not once per document as in BERT's
  code (where a document is either all short or all full); this gives 10 % of
  the chunks a short target, which is what the paper describes.
* A one-sentence chunk (one sentence already reaches the target) drawn
  IsNext takes the following sentence as B; BERT's code makes every such
  chunk NotNext, which biases the labels (47.8 % IsNext on the State of the
  Union corpus at max_seq_length 128) against the paper's 50 %. Only a
  document's last sentence, alone in its chunk, is always NotNext.
* `truncate_seq_pair` is reproduced in closed form: the final lengths are
  deterministic (`bert_tf.text.segment_packer.truncated_lengths`, the
  formula fine-tuning packs pairs with) and the number of tokens cut from the front of a side is
  Binomial(cut, 0.5), the distribution of BERT's one-coin-per-token loop.

Without NSP (`nsp=False`) each instance is a single segment of consecutive
sentences of one document, accumulated to the target length (here
`max_seq_length - 2`) and cut from the front or back at random, as RoBERTa's
DOC-SENTENCES format; its label is 0 and carries no information.

Shape legend: D documents in the window, N sentences in the window, I instances,
S max_seq_length.
"""

import tensorflow as tf

from bert_tf.text.segment_packer import truncated_lengths

# Tags folded into the window seed so the draws of each purpose are independent.
_CHUNK_TAG = 1
_TRUNCATE_A_TAG = 2
_TRUNCATE_B_TAG = 3
# Number of uniform draws per document per chunk in `_chunk_spans`.
_DRAWS = 6


def _uniform_index(u, n):
    """Maps uniform draws `u` in [0, 1) to integers in [0, n - 1] (n >= 1)."""
    index = tf.cast(tf.floor(u * tf.cast(n, tf.float32)), tf.int32)
    return tf.clip_by_value(index, 0, tf.maximum(n - 1, 0))


def _chunk_spans(sentence_offsets, doc_starts, doc_limits, seed, *, max_num_tokens,
                 short_seq_prob, nsp):
    """Sentence spans of every instance of every document of the window.

    A `tf.while_loop` advances a cursor in each document in parallel; each
    iteration emits at most one instance per document.

    Args:
      sentence_offsets: int32 [N + 1], token offset of each sentence (cumulative lengths).
      doc_starts, doc_limits: int32 [D], each document's sentence range.
      seed: stateless seed [2] of the window.

    Returns:
      int32 [I] tensors a_start, a_limit, b_start, b_limit (sentence indices,
      limits exclusive) and is_random [I] bool, in document order.
    """
    num_docs = tf.size(doc_starts)
    doc_index = tf.range(num_docs)
    doc_sizes = doc_limits - doc_starts
    offsets_row = sentence_offsets[None, :]  # [1, N + 1] for searchsorted

    def first_sentence_reaching(start, num_tokens):
        # Smallest m with offsets[m] >= offsets[start] + num_tokens: the chunk
        # [start, m) is the shortest one holding num_tokens tokens.
        values = tf.gather(sentence_offsets, start) + num_tokens
        return tf.searchsorted(offsets_row, values[None, :], side="left")[0]

    def body(step, cursor, spans):
        active = cursor < doc_limits
        # Finished documents compute a dummy instance (dropped below) from
        # their first sentence, so every index stays in range.
        cursor = tf.where(active, cursor, doc_starts)
        u = tf.random.stateless_uniform(
            [_DRAWS, num_docs], tf.random.experimental.stateless_fold_in(seed, step))
        target = tf.where(u[0] < short_seq_prob,
                          2 + _uniform_index(u[1], max_num_tokens - 1), max_num_tokens)
        chunk_limit = tf.clip_by_value(
            first_sentence_reaching(cursor, target), cursor + 1, doc_limits)
        chunk_size = chunk_limit - cursor
        if nsp:
            # NotNext with probability 0.5, and always when the chunk is the
            # document's last sentence (there is no actual next sentence).
            is_last = cursor + 1 >= doc_limits
            is_random = (u[3] < 0.5) | ((chunk_size == 1) & is_last)
            # A one-sentence chunk drawn IsNext takes its next sentence as B.
            chunk_limit = tf.where((chunk_size == 1) & ~is_random, cursor + 2, chunk_limit)
            chunk_size = chunk_limit - cursor
            a_count = tf.where(chunk_size >= 2, 1 + _uniform_index(u[2], chunk_size - 1), 1)
            a_limit = cursor + a_count
            # Another document of the window: draw among D - 1 and skip our own.
            if_other = _uniform_index(u[4], num_docs - 1)
            other = tf.where(num_docs > 1, if_other + tf.cast(if_other >= doc_index, tf.int32),
                             doc_index)
            random_start = (tf.gather(doc_starts, other)
                            + _uniform_index(u[5], tf.gather(doc_sizes, other)))
            a_tokens = tf.gather(sentence_offsets, a_limit) - tf.gather(sentence_offsets, cursor)
            random_limit = tf.clip_by_value(
                first_sentence_reaching(random_start, target - a_tokens),
                random_start + 1, tf.gather(doc_limits, other))
            b_start = tf.where(is_random, random_start, a_limit)
            b_limit = tf.where(is_random, random_limit, chunk_limit)
            # NotNext leaves the chunk's unused sentences for the next instance.
            next_cursor = tf.where(is_random, a_limit, chunk_limit)
        else:
            a_limit = chunk_limit
            b_start = b_limit = chunk_limit
            is_random = tf.zeros([num_docs], tf.bool)
            next_cursor = chunk_limit
        row = tf.stack([cursor, a_limit, b_start, b_limit,
                        tf.cast(is_random, tf.int32), tf.cast(active, tf.int32)])  # [6, D]
        spans = spans.write(step, row)
        return step + 1, tf.where(active, next_cursor, doc_limits), spans

    def cond(step, cursor, spans):
        # Always one step, so the TensorArray is never empty (an empty window
        # gives a [1, 6, 0] stack rather than an unshaped zero-size one).
        return (step == 0) | tf.reduce_any(cursor < doc_limits)

    spans = tf.TensorArray(tf.int32, size=0, dynamic_size=True,
                           element_shape=tf.TensorShape([6, None]))
    _, _, spans = tf.while_loop(cond, body, (0, doc_starts, spans))
    # [steps, 6, D] -> [D, steps, 6]: instances of a document stay together, in order.
    rows = tf.transpose(spans.stack(), [2, 0, 1])
    rows = tf.boolean_mask(rows, rows[:, :, 5] > 0)  # [I, 6]
    return (rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3], rows[:, 4] > 0)


def make_instances(document_tokens, seed, *, max_seq_length, cls_id, sep_id, pad_id=0,
                   short_seq_prob=0.1, nsp=True):
    """Builds the padded [CLS] A [SEP] B [SEP] instances of a window of documents.

    Args:
      document_tokens: int32 RaggedTensor [D, (sentences), (tokens)], the
        tokenized documents of one window; empty sentences and empty documents
        are allowed (and skipped).
      seed: stateless seed [2] for this window (fold the epoch and the window
        index into it).
      max_seq_length: S; each instance holds at most S tokens.
      cls_id, sep_id, pad_id: special token ids.
      short_seq_prob: probability of a shorter random target length.
      nsp: pairs with next-sentence labels; False gives single segments.

    Returns:
      dict with `input_ids` int32 [I, S], `input_mask` int32 [I, S],
      `segment_ids` int32 [I, S] and `next_sentence_labels` int32 [I]
      (0 IsNext, 1 NotNext; all 0 without NSP).
    """
    num_special = 3 if nsp else 2
    max_num_tokens = max_seq_length - num_special
    if max_num_tokens < 2:
        raise ValueError(
            f"max_seq_length={max_seq_length} leaves no room for text next to the "
            f"{num_special} special tokens")
    document_tokens = tf.cast(document_tokens, tf.int32)
    # Drop empty sentences, then documents left without sentences (BERT skips both).
    document_tokens = tf.ragged.boolean_mask(
        document_tokens, document_tokens.row_lengths(axis=2) > 0)
    document_tokens = tf.ragged.boolean_mask(document_tokens, document_tokens.row_lengths() > 0)
    sentences = document_tokens.values  # [N, (T)]
    tokens = sentences.values  # [total tokens]
    sentence_offsets = tf.concat(
        [[0], tf.cumsum(tf.cast(sentences.row_lengths(), tf.int32))], axis=0)  # [N + 1]
    doc_starts = tf.cast(document_tokens.row_starts(), tf.int32)
    doc_limits = tf.cast(document_tokens.row_limits(), tf.int32)

    chunk_seed = tf.random.experimental.stateless_fold_in(seed, _CHUNK_TAG)
    a_start, a_limit, b_start, b_limit, is_random = _chunk_spans(
        sentence_offsets, doc_starts, doc_limits, chunk_seed,
        max_num_tokens=max_num_tokens, short_seq_prob=short_seq_prob, nsp=nsp)

    # Sentence spans -> token spans.
    a_first = tf.gather(sentence_offsets, a_start)
    b_first = tf.gather(sentence_offsets, b_start)
    len_a = tf.gather(sentence_offsets, a_limit) - a_first
    len_b = tf.gather(sentence_offsets, b_limit) - b_first
    if nsp:
        new_a, new_b = truncated_lengths(len_a, len_b, max_num_tokens)
    else:
        new_a, new_b = tf.minimum(len_a, max_num_tokens), len_b
    a_first += _front_cut(len_a - new_a, seed, _TRUNCATE_A_TAG)
    b_first += _front_cut(len_b - new_b, seed, _TRUNCATE_B_TAG)
    tokens_a = tf.gather(tokens, tf.ragged.range(a_first, a_first + new_a))  # [I, (A)]
    tokens_b = tf.gather(tokens, tf.ragged.range(b_first, b_first + new_b))  # [I, (B)]

    num_instances = tf.size(a_start)
    cls = tf.fill([num_instances, 1], cls_id)
    sep = tf.fill([num_instances, 1], sep_id)
    if nsp:
        ids = tf.concat([cls, tokens_a, sep, tokens_b, sep], axis=1)  # [I, (len)]
        segments = tf.concat([tf.zeros_like(cls), tf.zeros_like(tokens_a), tf.zeros_like(sep),
                              tf.ones_like(tokens_b), tf.ones_like(sep)], axis=1)
    else:
        ids = tf.concat([cls, tokens_a, sep], axis=1)
        segments = tf.zeros_like(ids)
    shape = [None, max_seq_length]
    return {
        "input_ids": ids.to_tensor(default_value=pad_id, shape=shape),  # [I, S]
        "input_mask": tf.ones_like(ids).to_tensor(default_value=0, shape=shape),
        "segment_ids": segments.to_tensor(default_value=0, shape=shape),
        "next_sentence_labels": tf.cast(is_random, tf.int32),  # [I]
    }


def _front_cut(num_cut, seed, tag):
    """How many of `num_cut` removed tokens come off the front: Binomial(num_cut, 0.5)."""
    return tf.random.stateless_binomial(
        tf.shape(num_cut), tf.random.experimental.stateless_fold_in(seed, tag),
        counts=tf.cast(num_cut, tf.float32), probs=0.5, output_dtype=tf.int32)
