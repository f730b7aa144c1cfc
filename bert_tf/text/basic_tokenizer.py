"""In-graph equivalent of BERT's `BasicTokenizer`: raw UTF-8 text to words.

Splits a batch of strings into BERT's "basic" words (clean text, CJK
isolation, whitespace split, optional lower-case + NFD + accent stripping,
punctuation split) with graph ops only: `tf.strings.unicode_decode`, gathers
from the per-code-point tables of `codepoint_tables`, cumulative sums and
ragged reshapes. No Python runs per example, so it works in `tf.data.map`,
`tf.function` and SavedModels.

Invalid UTF-8 is decoded to U+FFFD, which BERT's `_clean_text` drops: that
equals Python's `bytes.decode("utf-8", "ignore")`, which is what
google-research/bert's `convert_to_unicode` does with bytes.

Tensor legend: B strings, N decoded code points, I normalized items (chars
and breaks), C word characters, W words (all flat over the batch).
"""

import collections

import tensorflow as tf

from bert_tf.text import codepoint_tables as ct

_Items = collections.namedtuple(
    "_Items", ["cp", "kind", "src", "row_splits", "flat", "byte_starts"]
)
# The normalized item stream of a batch: for each item [I] its code point,
# kind (WORD / ISOLATED / BREAK), source code point index into `flat` [N] (the
# decoded input); items of string b are
# [row_splits[b], row_splits[b + 1]). byte_starts [N] only with offsets.

SplitWords = collections.namedtuple(
    "SplitWords", ["words", "word_row_splits", "char_starts", "char_ends"]
)
SplitWords.__doc__ = """Words of a batch of strings.

words: int32 RaggedTensor [W, (chars)], normalized code points of each word.
word_row_splits: int64 [B + 1]; words of string b are
    `words[word_row_splits[b]:word_row_splits[b + 1]]`.
char_starts, char_ends: int64 [C] (aligned with `words.values`), the byte span
    in the original string of the code point each normalized char came from;
    None unless offsets were requested.
"""


def _utf8_length(cps):
    """Bytes that UTF-8 needs for each code point (int64)."""
    cps = tf.cast(cps, tf.int64)
    return (
        1
        + tf.cast(cps >= 0x80, tf.int64)
        + tf.cast(cps >= 0x800, tf.int64)
        + tf.cast(cps >= 0x10000, tf.int64)
    )


class _TwoLevelLookup(tf.Module):
    """Graph-side `TwoLevelTable.lookup` over int32 code points."""

    def __init__(self, table, name):
        super().__init__(name=name)
        self._block_index = tf.constant(table.block_index, tf.int32)
        self._blocks = tf.constant(table.blocks, tf.int32)

    def __call__(self, cps):
        block = tf.gather(self._block_index, tf.bitwise.right_shift(cps, ct.BLOCK_BITS))
        offset = tf.bitwise.bitwise_and(cps, ct.BLOCK_SIZE - 1)
        return tf.gather(self._blocks, block * ct.BLOCK_SIZE + offset)


class BasicTokenizer(tf.Module):
    """BERT's BasicTokenizer as graph ops.

    Args:
      lower_case: True for uncased models (lower-case, NFD, strip Mn marks),
        False for cased models (no case or accent change).
    """

    def __init__(self, lower_case=True, name=None):
        super().__init__(name=name)
        self.lower_case = bool(lower_case)
        tables = ct.build_codepoint_tables(self.lower_case)
        self.unicode_version = tables.unicode_version
        self._main = _TwoLevelLookup(tables.main, "main_table")
        self._ordering = _TwoLevelLookup(tables.ordering, "ordering_table")
        # One extra split keeps `splits[row + 1]` in range for row 0 even
        # when there are no expansions (cased mode).
        splits = tables.expansion_splits
        self._exp_splits = tf.constant(list(splits) + [splits[-1]], tf.int32)
        self._exp_cps = tf.constant(tables.expansion_cps, tf.int32)
        self._exp_kinds = tf.constant(tables.expansion_kinds, tf.int32)
        self._exp_offsets = tf.constant(tables.expansion_offsets, tf.int32)
        self._exp_ccc = tf.constant(tables.expansion_ccc, tf.int32)

    def normalize(self, strings, max_word_chars=100):
        """BERT-normalized text, for a BERT-style pre-tokenizer.

        Code points are cleaned, lower-cased and accent-stripped as BERT does,
        and every word break becomes one space. Punctuation and CJK chars are
        NOT surrounded by spaces: they are exactly the characters a BERT
        pre-tokenizer (splitting on whitespace, ASCII symbols, Unicode P* and
        CJK) splits off, which keeps this path cheap.

        Args:
          strings: string Tensor [B].
          max_word_chars: the word length (in chars) the flag checks against.

        Returns:
          (normalized string Tensor [B], bool scalar: True when some word may
          exceed `max_word_chars`, an upper bound which never misses one).
        """
        items = self._items(strings, with_offsets=False)
        normalized = tf.strings.unicode_encode(
            tf.RaggedTensor.from_row_splits(items.cp, items.row_splits, validate=False), "UTF-8"
        )
        return normalized, self._longest_run(items) > max_word_chars

    def split(self, strings, with_offsets=False):
        """Splits a 1-D string tensor into words; returns `SplitWords`."""
        items = self._items(strings, with_offsets)
        words, word_row_splits, char_src = self._group_words(items)
        char_starts = char_ends = None
        if with_offsets:
            char_starts = tf.gather(items.byte_starts, char_src)
            char_ends = char_starts + _utf8_length(tf.gather(items.flat, char_src))
        return SplitWords(words, word_row_splits, char_starts, char_ends)

    def _items(self, strings, with_offsets):
        """Decodes and maps code points to the normalized item stream."""
        strings = tf.convert_to_tensor(strings, tf.string)
        byte_starts = None
        if with_offsets:
            cps, byte_starts = tf.strings.unicode_decode_with_offsets(
                strings, "UTF-8", errors="replace", replacement_char=0xFFFD
            )
            byte_starts = byte_starts.values
        else:
            cps = tf.strings.unicode_decode(
                strings, "UTF-8", errors="replace", replacement_char=0xFFFD
            )
        flat = cps.values  # [N]
        packed = self._main(flat)
        kind = tf.bitwise.bitwise_and(packed, ct.KIND_MASK)

        needs_general_path = tf.reduce_any(
            (kind >= ct.EXPAND) | (tf.bitwise.bitwise_and(packed, ct.FLAG_REORDER) != 0)
        )
        item_cp, item_kind, item_src, items_per_cp = tf.cond(
            needs_general_path,
            lambda: self._items_general(flat, cps.value_rowids(), packed, kind),
            lambda: self._items_simple(flat, packed, kind),
        )
        # Items never move across strings, so string b's items start after
        # those of all code points before cps.row_splits[b].
        items_before = tf.concat(
            [[tf.constant(0, tf.int64)], tf.cumsum(tf.cast(items_per_cp, tf.int64))], 0
        )
        row_splits = tf.gather(items_before, cps.row_splits)
        return _Items(item_cp, item_kind, item_src, row_splits, flat, byte_starts)

    def _longest_run(self, items):
        """Upper bound of the longest word: most WORD items in a row.

        Isolated chars, breaks and string starts end a run (a run may be a
        few words glued by punctuation, hence an upper bound).
        """
        num_items = tf.shape(items.kind, out_type=tf.int64)[0]
        string_start = _string_starts(items)
        ends_run = tf.where((items.kind != ct.WORD) | string_start)[:, 0]
        edges = tf.concat([[tf.constant(-1, tf.int64)], ends_run, [num_items]], 0)
        return tf.reduce_max(edges[1:] - edges[:-1]) - 1 + tf.cast(
            tf.reduce_any(string_start), tf.int64
        )

    def _items_simple(self, flat, packed, kind):
        """Fast path: every code point gives at most one item, no context."""
        keep = kind <= ct.BREAK
        src = tf.cast(tf.where(keep)[:, 0], tf.int32)  # [I]
        delta = tf.bitwise.right_shift(tf.gather(packed, src), ct.PAYLOAD_SHIFT)
        return tf.gather(flat, src) + delta, tf.gather(kind, src), src, tf.cast(keep, tf.int32)

    def _items_general(self, flat, rows, packed, kind):
        """Slow path: expansions (e.g. Hangul), final sigma, NFD reordering."""
        payload = tf.bitwise.right_shift(packed, ct.PAYLOAD_SHIFT)
        is_expand = kind == ct.EXPAND
        single_cp = tf.where(kind == ct.SIGMA, self._sigma_cps(rows, packed, kind), flat + payload)
        single_kind = tf.where(kind == ct.SIGMA, ct.WORD, kind)

        exp_row = tf.where(is_expand, payload, 0)
        exp_start = tf.gather(self._exp_splits, exp_row)
        exp_len = tf.gather(self._exp_splits, exp_row + 1) - exp_start
        num_items = tf.where(
            is_expand, exp_len, tf.cast(single_kind <= ct.BREAK, tf.int32)
        )  # [N]
        n = tf.shape(flat)[0]
        src = tf.repeat(tf.range(n), num_items)  # [I]
        first_item = tf.cumsum(num_items, exclusive=True)
        within = tf.range(tf.shape(src)[0]) - tf.gather(first_item, src)
        from_exp = tf.gather(is_expand, src)
        exp_index = tf.gather(exp_start, src) + within
        # Keep gathers in range where the expansion table is not used.
        exp_index = tf.where(from_exp, exp_index, 0)
        safe_exp = lambda table: tf.gather(  # noqa: E731
            tf.concat([table, [0]], 0), exp_index
        )
        item_cp = tf.where(from_exp, safe_exp(self._exp_cps), tf.gather(single_cp, src))
        item_kind = tf.where(from_exp, safe_exp(self._exp_kinds), tf.gather(single_kind, src))

        if self.lower_case:
            needs_reorder = tf.reduce_any(tf.bitwise.bitwise_and(packed, ct.FLAG_REORDER) != 0)
            item_cp, item_kind, src = tf.cond(
                needs_reorder,
                lambda: self._canonical_reorder(
                    flat, rows, item_cp, item_kind, src, from_exp, safe_exp
                ),
                lambda: (item_cp, item_kind, src),
            )
        return item_cp, item_kind, src, num_items

    def _sigma_cps(self, rows, packed, kind):
        """Python's `str.lower()` of U+03A3 at every position: σ or final ς.

        Final iff the nearest non-Case_Ignorable char before it (in the same
        whitespace token) is Cased and the nearest after it is not. Breaks are
        neither, so they end the search like the token edges do.
        """
        anchor = tf.bitwise.bitwise_and(packed, ct.FLAG_IGNORABLE) == 0
        cased = tf.bitwise.bitwise_and(packed, ct.FLAG_CASED) != 0
        anchor_pos = tf.cast(tf.where(anchor)[:, 0], tf.int32)  # [A]
        num_anchors = tf.shape(anchor_pos)[0]
        anchors_before = tf.cumsum(tf.cast(anchor, tf.int32), exclusive=True)  # [N]
        sigma_pos = tf.cast(tf.where(kind == ct.SIGMA)[:, 0], tf.int32)  # [S]
        k = tf.gather(anchors_before, sigma_pos)  # sigma is anchor number k
        sigma_row = tf.gather(rows, sigma_pos)

        def neighbour_cased(anchor_number):
            valid = (anchor_number >= 0) & (anchor_number < num_anchors)
            pos = tf.gather(anchor_pos, tf.clip_by_value(anchor_number, 0, num_anchors - 1))
            return valid & (tf.gather(rows, pos) == sigma_row) & tf.gather(cased, pos)

        final = neighbour_cased(k - 1) & ~neighbour_cased(k + 1)
        sigma_cp = tf.where(final, ct.FINAL_SIGMA, ct.SMALL_SIGMA)
        n = tf.shape(kind)[0]
        return tf.scatter_nd(sigma_pos[:, None], sigma_cp, [n])

    def _canonical_reorder(self, flat, rows, item_cp, item_kind, src, from_exp, safe_exp):
        """Reproduces NFD canonical ordering between kept non-starters.

        Items sort stably by (run, combining class), where a run starts at
        each combining-class-0 character of NFD(lower(text)), stripped marks
        included (their counts come from the ordering table).
        """
        ordering = self._ordering(flat)
        starters = tf.cast(tf.bitwise.bitwise_and(ordering, 0xF), tf.int64)
        # A new string always starts a new run: add the row index.
        run_base = tf.cumsum(starters, exclusive=True) + rows  # [N]
        single_offset = tf.bitwise.bitwise_and(tf.bitwise.right_shift(ordering, 4), 0xF)
        single_ccc = tf.bitwise.right_shift(ordering, 8)
        offset = tf.where(from_exp, safe_exp(self._exp_offsets), tf.gather(single_offset, src))
        ccc = tf.where(from_exp, safe_exp(self._exp_ccc), tf.gather(single_ccc, src))
        key = (tf.gather(run_base, src) + tf.cast(offset, tf.int64)) * 256 + tf.cast(ccc, tf.int64)
        order = tf.argsort(key, stable=True)
        return tf.gather(item_cp, order), tf.gather(item_kind, order), tf.gather(src, order)

    def _group_words(self, items):
        """Groups word chars into words: breaks end words, isolated chars stand alone."""
        is_char = items.kind <= ct.ISOLATED
        prev_kind = tf.concat([[ct.BREAK], items.kind[:-1]], 0)
        starts_word = is_char & (
            _string_starts(items) | (prev_kind != ct.WORD) | (items.kind == ct.ISOLATED)
        )
        char_item = tf.where(is_char)[:, 0]  # [C]
        char_cp = tf.gather(items.cp, char_item)
        char_src = tf.gather(items.src, char_item)
        word_start = tf.where(tf.gather(starts_word, char_item))[:, 0]  # [W]
        words = tf.RaggedTensor.from_row_starts(char_cp, word_start, validate=False)
        words_before = tf.concat(
            [[tf.constant(0, tf.int64)], tf.cumsum(tf.cast(starts_word, tf.int64))], 0
        )
        word_row_splits = tf.gather(words_before, items.row_splits)
        return words, word_row_splits, char_src


def _string_starts(items):
    """bool [I]: the item is the first of its string."""
    num_items = tf.shape(items.kind, out_type=tf.int64)[0]
    # Empty strings share a split index: count, then test.
    marks = tf.scatter_nd(
        items.row_splits[:-1, None],
        tf.ones_like(items.row_splits[:-1], tf.int32),
        [num_items + 1],
    )
    return marks[:-1] > 0
