"""BERT's windowed span features of SQuAD examples (`bert_tf.data.squad_reader`).

As google-research/bert's `run_squad.py`: [CLS] question [SEP] context
window [SEP], the context cut into windows with a stride, each context
token mapped back to its character span in the original context so that
answers are taken from the context text itself. Shape legend: F windows
(features), L max_seq_length, T tokens of a context.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import tensorflow as tf

if TYPE_CHECKING:  # names for the type hints only
    from bert_tf.data.squad_reader import SquadExample
    from bert_tf.text.tokenizer import BertTokenizer

# Strings per eager tokenizer call: large batches amortise the op overhead.
_TOKENIZE_BATCH = 4000


@dataclasses.dataclass
class SquadFeatures:
    """BERT inputs for SQuAD: one row per context window.

    token_ids: int32 [F, L] [CLS] question [SEP] window [SEP] then padding.
    segment_ids: int32 [F, L] 1 on the window and its [SEP], else 0.
    padding_mask: int32 [F, L] 1 on real tokens.
    example_index: int32 [F] index of the window's example.
    token_to_char: int32 [F, L, 2] (start, end) char offsets of each context
      token in the example's context, end exclusive; -1 elsewhere.
    max_context: bool [F, L] the context token has its maximum context in
      this window (BERT's `_check_is_max_context`).
    start_positions / end_positions: int32 [F] token span of the first gold
      answer in this window; 0 ([CLS]) when impossible or not in the window.
    """

    token_ids: np.ndarray
    segment_ids: np.ndarray
    padding_mask: np.ndarray
    example_index: np.ndarray
    token_to_char: np.ndarray
    max_context: np.ndarray
    start_positions: np.ndarray
    end_positions: np.ndarray

    def __len__(self):
        """Number of windows F."""
        return len(self.example_index)


def create_features(examples: Sequence[SquadExample], tokenizer: BertTokenizer,
                    max_seq_length: int = 384, doc_stride: int = 128,
                    max_query_length: int = 64) -> SquadFeatures:
    """Windows, inputs and span labels of `examples` (BERT's recipe).

    The question is cut to `max_query_length` tokens; the context is cut
    into windows of `max_seq_length - len(question) - 3` tokens, each
    starting `doc_stride` tokens after the previous one (the last window
    ends at the last token). Labels come from the first gold answer: the
    context tokens overlapping its char span, so a span that cuts a token
    is widened to whole tokens.

    Args:
      examples: the `SquadExample`s (`bert_tf.data.squad_reader`).
      tokenizer: the run's WordPiece tokenizer.
      max_seq_length: tokens per window, [CLS] question [SEP] and the final [SEP] included.
      doc_stride: context tokens from one window's start to the next one's.
      max_query_length: the question's tokens are cut to this many.

    Returns:
      `SquadFeatures`; every example has at least one window.
    """
    if max_query_length < 1 or max_seq_length < 4:
        raise ValueError(f"max_query_length ({max_query_length}) must be >= 1 and max_seq_length "
                         f"({max_seq_length}) >= 4")
    if doc_stride < 1:
        raise ValueError(f"doc_stride must be >= 1, got {doc_stride}")
    contexts = sorted({e.context for e in examples})
    context_tokens = dict(zip(contexts, _tokenize_contexts(tokenizer, contexts)))
    questions = _tokenize_questions(tokenizer, [e.question for e in examples])
    rows = []
    for index, example in enumerate(examples):
        ids, chars = context_tokens[example.context]
        question = questions[index][:max_query_length]
        span = _answer_token_span(example, chars)
        window_length = max_seq_length - len(question) - 3
        if window_length < 1:
            raise ValueError(
                f"example {index} ({example.qas_id}): a question of {len(question)} tokens leaves "
                f"no room for context in max_seq_length {max_seq_length}; lower max_query_length")
        windows = _windows(len(ids), window_length, doc_stride)
        for window, max_context in zip(windows, _max_context(len(ids), windows)):
            rows.append(_window_row(tokenizer, index, question, ids, chars, window,
                                    max_context, span))
    return _stack(rows, max_seq_length)


def _tokenize_contexts(tokenizer, contexts):
    """(ids int32 [T], chars int32 [T, 2]) per context, char offsets end exclusive."""
    result = []
    for i in range(0, len(contexts), _TOKENIZE_BATCH):
        batch = contexts[i:i + _TOKENIZE_BATCH]
        ids, starts, ends = tokenizer.tokenize_with_offsets(tf.constant(batch, tf.string))
        splits = ids.row_splits.numpy()
        flat_ids = ids.flat_values.numpy().astype(np.int32)
        flat_starts = starts.flat_values.numpy()
        flat_ends = ends.flat_values.numpy()
        for j, context in enumerate(batch):
            row = slice(splits[j], splits[j + 1])
            byte_to_char = _byte_to_char(context)
            chars = np.stack([byte_to_char[flat_starts[row]], byte_to_char[flat_ends[row]]], -1)
            result.append((flat_ids[row], chars.astype(np.int32)))
    return result


def _byte_to_char(text):
    """int array [bytes + 1]: char index of each UTF-8 byte, then len(text).

    The tokenizer's offsets are byte offsets at char boundaries, so this
    maps both starts and (exclusive) ends to char offsets.
    """
    encoded = np.frombuffer(text.encode("utf-8"), np.uint8)
    # Continuation bytes are 0b10xxxxxx; every other byte starts a char.
    starts_char = (encoded & 0xC0) != 0x80
    return np.append(np.cumsum(starts_char) - 1, len(text))


def _tokenize_questions(tokenizer, questions):
    result = []
    for i in range(0, len(questions), _TOKENIZE_BATCH):
        ids = tokenizer.tokenize(tf.constant(questions[i:i + _TOKENIZE_BATCH], tf.string))
        splits = ids.row_splits.numpy()
        flat = ids.flat_values.numpy().astype(np.int32)
        result.extend(flat[splits[j]:splits[j + 1]] for j in range(len(splits) - 1))
    return result


def _answer_token_span(example, chars):
    """(first, last) context token of the first gold answer, or None."""
    if example.is_impossible or not example.answers:
        return None
    text, start = example.answers[0]
    end = start + len(text)
    inside = np.nonzero((chars[:, 1] > start) & (chars[:, 0] < end))[0]
    if not len(inside):
        raise ValueError(f"example {example.qas_id}: answer {text!r} at char {start} covers no "
                         f"token of its context (only characters the tokenizer drops)")
    return inside[0], inside[-1]


def _windows(num_tokens, window_length, stride):
    """(start, length) of each context window, as BERT's `doc_spans`."""
    windows, start = [], 0
    while True:
        length = min(num_tokens - start, window_length)
        windows.append((start, length))
        if start + length >= num_tokens:
            return windows
        start += min(length, stride)


def _max_context(num_tokens, windows):
    """bool [length] per window: its tokens that have their maximum context there.

    BERT's `_check_is_max_context`: a token's score in a window is
    min(left, right context) + 0.01 * window length; the first window with
    the highest score wins.
    """
    positions = np.arange(num_tokens)
    best_score = np.full(num_tokens, -np.inf)
    best_window = np.full(num_tokens, -1)
    for w, (start, length) in enumerate(windows):
        pos = positions[start:start + length]
        score = np.minimum(pos - start, start + length - 1 - pos) + 0.01 * length
        better = score > best_score[pos]  # strict: ties keep the earlier window
        best_score[pos[better]] = score[better]
        best_window[pos[better]] = w
    return [best_window[start:start + length] == w for w, (start, length) in enumerate(windows)]


def _window_row(tokenizer, index, question, ids, chars, window, max_context, span):
    """The arrays of one window, unpadded, as a dict of `SquadFeatures` fields."""
    start, length = window
    offset = len(question) + 2  # [CLS] question [SEP]
    token_ids = np.concatenate([
        [tokenizer.cls_id], question, [tokenizer.sep_id],
        ids[start:start + length], [tokenizer.sep_id]]).astype(np.int32)
    segment_ids = np.zeros(len(token_ids), np.int32)
    segment_ids[offset:] = 1
    token_to_char = np.full((len(token_ids), 2), -1, np.int32)
    token_to_char[offset:offset + length] = chars[start:start + length]
    is_max_context = np.zeros(len(token_ids), bool)
    is_max_context[offset:offset + length] = max_context
    label = (0, 0)
    if span is not None and start <= span[0] and span[1] < start + length:
        label = (span[0] - start + offset, span[1] - start + offset)
    return {
        "token_ids": token_ids,
        "segment_ids": segment_ids,
        "example_index": index,
        "token_to_char": token_to_char,
        "max_context": is_max_context,
        "start_positions": label[0],
        "end_positions": label[1],
    }


def _stack(rows, max_seq_length):
    """`SquadFeatures` from window rows, padded to `max_seq_length`."""
    num = len(rows)
    token_ids = np.zeros((num, max_seq_length), np.int32)
    segment_ids = np.zeros((num, max_seq_length), np.int32)
    padding_mask = np.zeros((num, max_seq_length), np.int32)
    token_to_char = np.full((num, max_seq_length, 2), -1, np.int32)
    max_context = np.zeros((num, max_seq_length), bool)
    for f, row in enumerate(rows):
        used = len(row["token_ids"])
        token_ids[f, :used] = row["token_ids"]
        segment_ids[f, :used] = row["segment_ids"]
        padding_mask[f, :used] = 1
        token_to_char[f, :used] = row["token_to_char"]
        max_context[f, :used] = row["max_context"]
    return SquadFeatures(
        token_ids=token_ids,
        segment_ids=segment_ids,
        padding_mask=padding_mask,
        example_index=np.array([r["example_index"] for r in rows], np.int32).reshape(num),
        token_to_char=token_to_char,
        max_context=max_context,
        start_positions=np.array([r["start_positions"] for r in rows], np.int32).reshape(num),
        end_positions=np.array([r["end_positions"] for r in rows], np.int32).reshape(num),
    )
