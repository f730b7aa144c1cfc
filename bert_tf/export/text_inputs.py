"""Raw text -> packed encoder inputs, as in training (graph ops).

Every path uses the project's `BertTokenizer` and `SegmentPacker`, so a
served text is tokenized and truncated exactly like a training example.

Tensor legend: B batch, S max_seq_length, C choices, W words, T word pieces.
"""

import collections

import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf.text.segment_packer import truncated_lengths

# BERT's whitespace (tokenization._is_whitespace): space, \t, \n, \r and
# Unicode category Zs. RE2 syntax, used by tensorflow-text's regex split.
WHITESPACE_PATTERN = r"[\t\n\r\p{Zs}]+"

QuestionContext = collections.namedtuple(
    "QuestionContext", ["features", "context_start", "piece_starts", "piece_ends"])
QuestionContext.__doc__ = """Packed question/context pairs.

features: dict token_ids, segment_ids, padding_mask int32 [B, S].
context_start: int32 [B], the position of the first context piece.
piece_starts, piece_ends: int64 RaggedTensor [B, (T)], byte span of each
    context piece in the context string (all pieces, also truncated ones).
"""

Words = collections.namedtuple(
    "Words", ["features", "words", "word_starts", "word_ends", "first_piece"])
Words.__doc__ = """Packed whitespace-split words.

features: dict token_ids, segment_ids, padding_mask int32 [B, S].
words: string RaggedTensor [B, (W)]; word_starts/word_ends: int64 byte spans.
first_piece: int32 RaggedTensor [B, (W)], the position of each word's first
    piece in the packed sequence, -1 when the word has no piece or its pieces
    were truncated away.
"""


TEXT_TO_IDS_SCOPE = "text_to_ids"


def pack_texts(tokenizer, packer, texts):
    """One or two string Tensors [B] -> packed features [B, S]."""
    # One scope for the text-to-ids ops, so that a profile can tell them from the encoder's.
    with tf.name_scope(TEXT_TO_IDS_SCOPE):
        return packer([tokenizer.tokenize(text) for text in texts])


def pack_question_context(tokenizer, packer, questions, contexts, max_query_length):
    """SQuAD-style `[CLS] question [SEP] context [SEP]`, as BERT's run_squad.

    The question is cut to `max_query_length` pieces first; the packer then
    truncates longest-first (the context, in practice).
    """
    question_ids = tokenizer.tokenize(questions)[:, :max_query_length]
    context_ids, starts, ends = tokenizer.tokenize_with_offsets(contexts)
    features = packer([question_ids, context_ids])
    kept_question, _ = truncated_lengths(
        question_ids.row_lengths(), context_ids.row_lengths(), packer.max_seq_length - 3)
    context_start = tf.cast(kept_question, tf.int32) + 2  # after [CLS] question [SEP]
    return QuestionContext(features, context_start, starts, ends)


def pack_words(tokenizer, packer, texts):
    """Splits texts on BERT's whitespace and packs the pieces of all words."""
    words, word_starts, word_ends = tf_text.regex_split_with_offsets(
        texts, WHITESPACE_PATTERN)  # [B, (W)]
    pieces = tokenizer.tokenize(words.flat_values)  # [B * W, (P)]
    # [B * W, (P)] -> [B, (T)]: the pieces of a text's words in order.
    text_pieces = tf.RaggedTensor.from_row_splits(
        pieces.values, tf.gather(pieces.row_splits, words.row_splits), validate=False)
    features = packer([text_pieces])
    kept = tf.minimum(text_pieces.row_lengths(), packer.max_seq_length - 2)  # [B]
    # Index of each word's first piece within its text, then its position.
    first_in_text = pieces.row_starts() - tf.gather(
        text_pieces.row_splits, words.value_rowids())  # [B * W]
    has_piece = pieces.row_lengths() > 0
    kept_piece = first_in_text < tf.gather(kept, words.value_rowids())
    first_piece = tf.where(tf.logical_and(has_piece, kept_piece), first_in_text + 1, -1)
    return Words(features, words, word_starts, word_ends,
                 words.with_flat_values(tf.cast(first_piece, tf.int32)))


def pack_choices(tokenizer, packer, contexts, choices):
    """`[CLS] context [SEP] choice [SEP]` for each of C choices.

    Args:
      contexts: string [B]; choices: string [B, C].

    Returns:
      features int32 [B, C, S] (S: the packer's padded length).
    """
    num_choices = tf.shape(choices)[1]
    flat_contexts = tf.repeat(contexts, num_choices)  # [B * C], row-major like choices
    flat_choices = tf.reshape(choices, [-1])  # [B, C] -> [B * C]
    flat = pack_texts(tokenizer, packer, [flat_contexts, flat_choices])
    length = tf.shape(flat["token_ids"])[1]  # S, or the longest pair (dynamic padding)
    # [B * C, S] -> [B, C, S]
    return {key: tf.reshape(value, [-1, num_choices, length]) for key, value in flat.items()}
