"""Dynamic masked-LM masking, in graph and deterministic.

`mask_tokens` draws BERT's masked-LM targets for one sequence from a stateless
seed, so the same (seed, sequence) always gives the same mask, a new seed (for
example one folded with the epoch) gives a fresh one, and the op runs inside
`tf.data` maps on any host, TPU hosts included.

The semantics follow google-research/bert's `create_masked_lm_predictions`:

* number of predictions = min(max_predictions_per_seq,
  max(1, round(len(tokens) * masked_lm_prob))), where `len(tokens)` counts the
  [CLS]/[SEP] tokens but not the padding (round half to even, as Python's
  `round`);
* [CLS], [SEP], [PAD] and [MASK] are never selected;
* candidates are visited in a random order and a candidate is taken when it
  still fits the budget; with whole-word masking a candidate is a whole word
  (a piece plus the "##" pieces that follow it), so a word is masked entirely
  or not at all and the count may end below the budget, as in BERT;
* each selected token independently becomes [MASK] (80 %), stays unchanged
  (10 %) or becomes a random token (10 %): BERT's split, which
  `MaskingFractions` changes (the paper's Table 8 ablates it);
* positions are returned in ascending order, padded to
  `max_predictions_per_seq` with position 0, id 0 and weight 0.

Deliberate difference: BERT draws the random replacement from the whole
vocabulary, [PAD]/[CLS]/[unused99] included. Here it is drawn uniformly from
`random_token_ids`, by default every vocabulary entry except bracketed
tokens ([PAD], [UNK], [CLS], [SEP], [MASK], [unusedN]), because replacing a
word with a control token teaches the model nothing about language.

Shape legend: L sequence length (padded or not), P max_predictions_per_seq,
W candidate words.
"""

import dataclasses
import re

import numpy as np
import tensorflow as tf

from bert_tf.text import tokenizer


@dataclasses.dataclass(frozen=True)
class MaskingFractions:
    """What a selected token becomes: [MASK], itself, or a random token.

    Args:
      mask: fraction of the selected tokens replaced by [MASK].
      keep: fraction left unchanged (still predicted).
      random: fraction replaced by a random token.
    """

    mask: float = 0.8
    keep: float = 0.1
    random: float = 0.1

    def check(self, names: tuple[str, str, str] = ("mask", "keep", "random")) -> None:
        """Raises ValueError unless each fraction is in [0, 1] and they sum to 1.

        Args:
          names: how the message names the three values (e.g. the config keys).
        """
        values = (self.mask, self.keep, self.random)
        given = ", ".join(f"{name}={value}" for name, value in zip(names, values))
        for name, value in zip(names, values):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be in [0, 1]; got {given}")
        if abs(sum(values) - 1.0) > 1e-6:
            raise ValueError(f"{', '.join(names)} must sum to 1; got {given} "
                             f"(sum {sum(values):g})")


BERT_FRACTIONS = MaskingFractions()

_BRACKETED = re.compile(r"^\[[^\]]*\]$")


@dataclasses.dataclass(frozen=True)
class VocabInfo:
    """What masking needs to know about a WordPiece vocabulary.

    Attributes:
      tokens: the vocabulary, one token per id.
      pad_id, unk_id, cls_id, sep_id, mask_id: ids of BERT's special tokens.
      is_continuation: bool numpy array [V], True for "##" pieces (None when
        only the special ids are known).
      random_token_ids: int32 numpy array of the ids random replacement draws from.
    """

    tokens: tuple
    pad_id: int
    unk_id: int
    cls_id: int
    sep_id: int
    mask_id: int
    is_continuation: np.ndarray
    random_token_ids: np.ndarray

    @property
    def vocab_size(self):
        return len(self.tokens)

    @property
    def special_ids(self):
        """Ids never selected for prediction."""
        return (self.pad_id, self.cls_id, self.sep_id, self.mask_id)


def read_vocab(vocab_file):
    """Reads a BERT `vocab.txt` (one token per line, id = line number) into `VocabInfo`.

    Raises:
      FileNotFoundError: the file does not exist.
      ValueError: the file is empty or lacks a special token; names the file.
    """
    tokens, _ = tokenizer.read_vocab_tokens(vocab_file)
    return vocab_info_from_tokens(tokens, source=vocab_file)


def vocab_info_from_tokens(tokens, source="vocabulary"):
    """`VocabInfo` of a token list (id = index; a repeated token means its last id, as in BERT).

    Raises:
      ValueError: [PAD], [UNK], [CLS], [SEP] or [MASK] is missing; names `source`.
    """
    tokens = tuple(tokens)
    index = {token: i for i, token in enumerate(tokens)}
    missing = [t for t in tokenizer.SPECIAL_TOKENS if t not in index]
    if missing:
        raise ValueError(f"{source}: vocabulary lacks the special tokens {missing}")
    is_continuation = np.array([t.startswith("##") and len(t) > 2 for t in tokens])
    random_ids = np.array(
        [i for i, t in enumerate(tokens) if t and not _BRACKETED.match(t)], dtype=np.int32)
    return VocabInfo(
        tokens=tokens, pad_id=index["[PAD]"], unk_id=index["[UNK]"],
        cls_id=index["[CLS]"], sep_id=index["[SEP]"], mask_id=index["[MASK]"],
        is_continuation=is_continuation, random_token_ids=random_ids)


def num_predictions(length, masked_lm_prob, max_predictions_per_seq):
    """BERT's prediction budget for a sequence of `length` tokens (int32 tensor)."""
    length = tf.cast(length, tf.float32)
    # tf.round rounds half to even, like Python's round() in create_pretraining_data.py.
    budget = tf.cast(tf.round(length * masked_lm_prob), tf.int32)
    return tf.minimum(max_predictions_per_seq, tf.maximum(1, budget))


def _greedy_fit(sizes, budget):
    """Which of `sizes` ([W], in visiting order) BERT's greedy loop takes for `budget`.

    BERT walks the candidates in order and takes one when it still fits the
    remaining budget. Done in rounds: take the longest prefix that fits, drop
    the first candidate that did not fit, and forget every candidate larger
    than the budget left (it can never fit again). Each round lowers the budget
    below the size of the dropped candidate, so there are at most a handful of
    rounds (one when all sizes are 1).
    """
    num = tf.size(sizes)
    index = tf.range(num)

    def cond(taken, available, remaining):
        return tf.reduce_any(available & (sizes <= remaining))

    def body(taken, available, remaining):
        open_ = available & (sizes <= remaining)
        cumulative = tf.cumsum(tf.where(open_, sizes, 0))
        fits = open_ & (cumulative <= remaining)
        overflow = open_ & ~fits
        first_overflow = tf.reduce_min(tf.where(overflow, index, num))
        remaining = remaining - tf.reduce_sum(tf.where(fits, sizes, 0))
        return taken | fits, open_ & (index > first_overflow), remaining

    taken, _, _ = tf.while_loop(
        cond, body, (tf.zeros([num], tf.bool), tf.ones([num], tf.bool), budget))
    return taken


def mask_tokens(token_ids, seed, *, mask_id, special_ids, random_token_ids,
                max_predictions_per_seq=20, masked_lm_prob=0.15,
                is_continuation=None, pad_id=0, fractions=BERT_FRACTIONS):
    """Draws masked-LM targets for one sequence (see the module docstring).

    Args:
      token_ids: int32 [L], [CLS] ... [SEP] possibly followed by `pad_id` padding.
      seed: int32/int64 [2], a stateless seed; fold the epoch and the example
        index into it (`tf.random.experimental.stateless_fold_in`).
      mask_id: id of [MASK].
      special_ids: ids never selected ([PAD], [CLS], [SEP], [MASK]).
      random_token_ids: int32 [R], ids a random replacement is drawn from.
      max_predictions_per_seq: P, the padded number of predictions.
      masked_lm_prob: fraction of the tokens to predict (a float, or a float32
        scalar tensor).
      is_continuation: optional bool [V] table marking "##" pieces; given, a
        piece and its "##" continuations are masked together (whole-word masking).
      pad_id: id of [PAD]; tokens equal to it are padding, not counted.
      fractions: a `MaskingFractions`, what the selected tokens become.

    Returns:
      dict with `input_ids` int32 [L] (the masked sequence), `masked_lm_positions`
      int32 [P] (ascending), `masked_lm_ids` int32 [P] (the original tokens),
      `masked_lm_weights` float32 [P] (1.0 for real predictions, 0.0 for padding).
    """
    token_ids = tf.cast(token_ids, tf.int32)
    seed = tf.convert_to_tensor(seed)
    length = tf.size(token_ids)
    select_seed, decide_seed, replace_seed = tf.unstack(
        tf.random.experimental.stateless_split(seed, 3))

    special = tf.constant(list(special_ids), tf.int32)
    is_candidate = tf.reduce_all(token_ids[:, None] != special[None, :], axis=1)  # [L]
    num_tokens = tf.reduce_sum(tf.cast(token_ids != pad_id, tf.int32))

    # Each candidate word starts at a candidate that is not a "##" piece glued
    # to the candidate before it (a "##" piece right after [SEP] starts a word:
    # words never span a special token).
    if is_continuation is not None:
        table = tf.constant(is_continuation, tf.bool)
        glued = tf.gather(table, token_ids)
        previous_candidate = tf.concat([[False], is_candidate[:-1]], axis=0)
        word_start = is_candidate & ~(glued & previous_candidate)
    else:
        word_start = is_candidate
    num_words = tf.reduce_sum(tf.cast(word_start, tf.int32))
    # [L]: word index of each candidate, num_words (one past the end) elsewhere.
    word_of_token = tf.where(
        is_candidate, tf.cumsum(tf.cast(word_start, tf.int32)) - 1, num_words)
    word_sizes = tf.math.bincount(
        word_of_token, minlength=num_words + 1, maxlength=num_words + 1)[:num_words]  # [W]

    # Random visiting order of the words.
    keys = tf.random.stateless_uniform([num_words], select_seed)
    order = tf.argsort(keys, stable=True)  # [W], word visited at step i
    budget = num_predictions(num_tokens, masked_lm_prob, max_predictions_per_seq)
    if is_continuation is None:
        taken_in_order = tf.range(num_words) < budget
    else:
        taken_in_order = _greedy_fit(tf.gather(word_sizes, order), budget)
    # [W + 1]: the extra last entry (never taken) is where non-candidates point.
    word_taken = tf.scatter_nd(order[:, None], taken_in_order, [num_words + 1])
    selected = tf.gather(word_taken, word_of_token)  # [L]

    # By default 80 % [MASK], 10 % unchanged, 10 % random token.
    decide = tf.random.stateless_uniform([length], decide_seed)
    random_ids = tf.convert_to_tensor(random_token_ids, tf.int32)
    replacement = tf.gather(random_ids, tf.random.stateless_uniform(
        [length], replace_seed, minval=0, maxval=tf.size(random_ids), dtype=tf.int32))
    masked = tf.where(decide < fractions.mask, mask_id,
                      tf.where(decide < fractions.mask + fractions.keep, token_ids, replacement))
    input_ids = tf.where(selected, masked, token_ids)

    positions = tf.cast(tf.where(selected)[:, 0], tf.int32)  # ascending
    num_selected = tf.size(positions)
    pad = [[0, max_predictions_per_seq - num_selected]]
    return {
        "input_ids": input_ids,
        "masked_lm_positions": tf.ensure_shape(
            tf.pad(positions, pad), [max_predictions_per_seq]),
        "masked_lm_ids": tf.ensure_shape(
            tf.pad(tf.gather(token_ids, positions), pad), [max_predictions_per_seq]),
        "masked_lm_weights": tf.ensure_shape(
            tf.pad(tf.ones([num_selected], tf.float32), pad), [max_predictions_per_seq]),
    }


class DynamicMasker:
    """`mask_tokens` bound to a vocabulary and a masking configuration.

    Build it from the tokenizer's special ids with `DynamicMasker.from_vocab`
    (a `VocabInfo`) and call it as `masker(token_ids, seed)`.
    """

    def __init__(self, *, mask_id, special_ids, random_token_ids,
                 max_predictions_per_seq=20, masked_lm_prob=0.15,
                 is_continuation=None, pad_id=0, fractions=BERT_FRACTIONS):
        fractions.check()
        if not 0.0 < masked_lm_prob < 1.0:
            raise ValueError(f"masked_lm_prob must be in (0, 1), got {masked_lm_prob}")
        if max_predictions_per_seq < 1:
            raise ValueError(
                f"max_predictions_per_seq must be >= 1, got {max_predictions_per_seq}")
        if len(random_token_ids) == 0:
            raise ValueError("random_token_ids is empty")
        self.mask_id = int(mask_id)
        self.special_ids = tuple(int(i) for i in special_ids)
        self.random_token_ids = np.asarray(random_token_ids, np.int32)
        self.max_predictions_per_seq = int(max_predictions_per_seq)
        self.masked_lm_prob = float(masked_lm_prob)
        self.is_continuation = (None if is_continuation is None
                                else np.asarray(is_continuation, bool))
        self.pad_id = int(pad_id)
        self.fractions = fractions

    @classmethod
    def from_vocab(cls, vocab, *, whole_word_masking=False, **kwargs):
        """A masker for a `VocabInfo`; `whole_word_masking` uses its "##" table."""
        return cls(mask_id=vocab.mask_id, special_ids=vocab.special_ids,
                   random_token_ids=vocab.random_token_ids, pad_id=vocab.pad_id,
                   is_continuation=vocab.is_continuation if whole_word_masking else None,
                   **kwargs)

    @property
    def whole_word_masking(self):
        return self.is_continuation is not None

    def __call__(self, token_ids, seed, masked_lm_prob=None):
        """Masks one sequence (`mask_tokens`).

        Args:
          token_ids: int32 [L].
          seed: a stateless seed [2].
          masked_lm_prob: this sequence's rate (a float or a float32 scalar tensor, e.g.
            from a schedule); None: the masker's own. It must not exceed the masker's
            rate when buffers were sized by it (packed rows).
        """
        return mask_tokens(
            token_ids, seed, mask_id=self.mask_id, special_ids=self.special_ids,
            random_token_ids=self.random_token_ids,
            max_predictions_per_seq=self.max_predictions_per_seq,
            masked_lm_prob=self.masked_lm_prob if masked_lm_prob is None else masked_lm_prob,
            is_continuation=self.is_continuation, pad_id=self.pad_id,
            fractions=self.fractions)
