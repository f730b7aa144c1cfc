"""BERT's BasicTokenizer semantics, compiled into per-code-point lookup tables.

google-research/bert's `BasicTokenizer` is defined character by character
with Python's `unicodedata` and `str.lower()`. Rather than approximating it
with ICU (whose Unicode version and case mappings differ from Python's), this
module runs those very Python functions once per code point and stores the
outcome in integer tables that graph ops can gather from. The tables therefore
encode exactly the semantics of the Python that builds them (the Unicode
version is `unicodedata.unidata_version`).

What each code point `c` becomes, in order of BERT's pipeline:

* dropped: NUL, U+FFFD and categories C* except \\t \\n \\r (`_clean_text`);
* a word break: BERT whitespace (space, \\t, \\n, \\r, Zs) and anything else
  `str.split()` splits on (U+2028, U+2029);
* otherwise `strip_accents(c.lower())` when uncased, `c` when cased, as a
  list of items; each item is a word character, a punctuation character
  (a word of its own) or a break. CJK ideographs are words of their own.

Two parts of the pipeline are not per-code-point and get side information:

* `str.lower()` maps U+03A3 (capital sigma) to final sigma by context; the
  tables flag sigma plus the `Cased` / `Case_Ignorable` properties (probed
  through `str.lower()` itself) so the graph can evaluate that context.
* NFD canonical reordering can swap two kept non-starters (a few Mc marks
  with a non-zero combining class). The tables flag code points whose output
  can take part and carry the combining-class data to reorder in graph.

Tables are two-level (block index + deduplicated 128-entry blocks) to stay
small enough to live as graph constants.
"""

import dataclasses
import functools
import hashlib
import logging
import os
import tempfile
import unicodedata
import zipfile

import numpy as np

logger = logging.getLogger(__name__)

NUM_CODEPOINTS = 0x110000
BLOCK_BITS = 7
BLOCK_SIZE = 1 << BLOCK_BITS

# Item kinds (low 3 bits of a packed table entry).
WORD = 0  # part of the current word
ISOLATED = 1  # a word on its own (punctuation, CJK ideograph)
BREAK = 2  # whitespace: ends the current word, emits nothing
DROP = 3  # emits nothing and does not break the word
EXPAND = 4  # several items: payload indexes the expansion table
SIGMA = 5  # U+03A3 under lower-casing: sigma or final sigma by context

KIND_MASK = 0x7
# Flags for the final-sigma context of `str.lower()`.
FLAG_IGNORABLE = 1 << 3  # Case_Ignorable (or removed before lower-casing)
FLAG_CASED = 1 << 4  # Cased and not Case_Ignorable
# The code point's output may take part in NFD canonical reordering.
FLAG_REORDER = 1 << 5
PAYLOAD_SHIFT = 6  # WORD/ISOLATED: out_cp - cp; EXPAND: expansion row

CAPITAL_SIGMA = 0x3A3
SMALL_SIGMA = 0x3C3
FINAL_SIGMA = 0x3C2

# google-research/bert tokenization.py `_is_chinese_char`.
CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def is_bert_whitespace(char):
    """BERT's `_is_whitespace`: space, \\t, \\n, \\r or category Zs."""
    return char in " \t\n\r" or unicodedata.category(char) == "Zs"


def is_bert_control(char):
    """BERT's `_is_control`: category C* except \\t, \\n, \\r."""
    return char not in "\t\n\r" and unicodedata.category(char).startswith("C")


def is_bert_punctuation(char):
    """BERT's `_is_punctuation`: ASCII non-alphanumerics or category P*."""
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def is_cjk(cp):
    """BERT's `_is_chinese_char`."""
    return any(lo <= cp <= hi for lo, hi in CJK_RANGES)


def _strip_accents(text):
    return "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")


def _item_kind(char):
    if char.isspace():
        return BREAK
    if is_bert_punctuation(char):
        return ISOLATED
    return WORD


def _case_flags(char):
    """`Case_Ignorable` / `Cased` as Python's own final-sigma rule sees them.

    Python does not expose these properties, so probe `str.lower()`: sigma
    after "A" + c is final iff c is ignorable or cased; after "1" + c it is
    final iff c is cased and not ignorable.
    """
    after_cased = ("A" + char + "\u03a3").lower()[-1] == "\u03c2"
    after_uncased = ("1" + char + "\u03a3").lower()[-1] == "\u03c2"
    flags = 0
    if after_cased and not after_uncased:
        flags |= FLAG_IGNORABLE
    if after_uncased:
        flags |= FLAG_CASED
    return flags


@dataclasses.dataclass(frozen=True)
class TwoLevelTable:
    """int32 values for every code point: `blocks[index[cp >> 7], cp & 127]`."""

    block_index: np.ndarray  # int32 [NUM_CODEPOINTS / BLOCK_SIZE]
    blocks: np.ndarray  # int32 [num_unique_blocks * BLOCK_SIZE]

    @classmethod
    def from_dense(cls, dense):
        """Deduplicates the 128-entry blocks of a dense [NUM_CODEPOINTS] array."""
        unique, inverse = np.unique(
            dense.reshape(-1, BLOCK_SIZE), axis=0, return_inverse=True
        )
        return cls(
            block_index=inverse.reshape(-1).astype(np.int32),
            blocks=unique.reshape(-1).astype(np.int32),
        )

    def lookup(self, cps):
        """NumPy lookup, the same arithmetic the graph uses."""
        cps = np.asarray(cps)
        block = self.block_index[cps >> BLOCK_BITS]
        return self.blocks[block * BLOCK_SIZE + (cps & (BLOCK_SIZE - 1))]


@dataclasses.dataclass(frozen=True)
class CodepointTables:
    """Everything the graph normalizer needs, for one casing mode.

    `main` packs kind | flags | payload (see the constants above).
    Expansion row r holds the items of a code point whose output has several
    items: `expansion_cps[s:e]` and `expansion_kinds[s:e]` for
    `s, e = expansion_splits[r], expansion_splits[r + 1]`.

    For canonical reordering (rare; see FLAG_REORDER), `ordering` packs per
    code point `starters | last_offset << 4 | ccc << 8`: how many combining
    class 0 characters NFD(lower(c)) has (0 for dropped controls), how many
    of them precede-or-are the single output item, and the item's combining
    class. `expansion_offsets` / `expansion_ccc` give the same per item.
    """

    lower_case: bool
    unicode_version: str
    main: TwoLevelTable
    ordering: TwoLevelTable
    expansion_splits: np.ndarray
    expansion_cps: np.ndarray
    expansion_kinds: np.ndarray
    expansion_offsets: np.ndarray
    expansion_ccc: np.ndarray


def _reorder_sensitive():
    """Characters that stay after accent stripping yet have non-zero ccc.

    Only their relative order can change under NFD canonical reordering
    (every other non-starter is a Mn mark that stripping removes).
    """
    found = set()
    for cp in range(NUM_CODEPOINTS):
        char = chr(cp)
        if unicodedata.combining(char) and unicodedata.category(char) != "Mn":
            found.add(cp)
    return frozenset(found)


def _items_and_order(char, lower_case):
    """Output items [(cp, kind)] of one code point, and per-item reorder data."""
    cp = ord(char)
    if cp == 0 or cp == 0xFFFD or is_bert_control(char):
        return [], 0, []
    if is_bert_whitespace(char) or char.isspace():
        return [(0x20, BREAK)], 1, [(1, 0)]
    if not lower_case:
        kind = ISOLATED if is_cjk(cp) else _item_kind(char)
        return [(cp, kind)], 1, [(1, 0)]
    decomposed = unicodedata.normalize("NFD", char.lower())
    items, order, starters = [], [], 0
    for out in decomposed:
        ccc = unicodedata.combining(out)
        if ccc == 0:
            starters += 1
        if unicodedata.category(out) == "Mn":
            continue
        items.append((ord(out), _item_kind(out)))
        order.append((starters, ccc))
    if is_cjk(cp):
        if len(items) != 1:
            raise AssertionError(f"CJK U+{cp:04X} lower-cases to {len(items)} items")
        items = [(items[0][0], ISOLATED)]
    return items, starters, order


@functools.lru_cache(maxsize=2)
def build_codepoint_tables(lower_case):
    """The tables for BERT's normalizer, once per process and mode.

    Building them walks every code point in Python (about a second); the
    result is kept on disk (see `cache_file`) and read back by later
    processes. A cache file that is missing, unreadable or incomplete is
    rebuilt; one that cannot be written is only logged.

    Args:
      lower_case: True for uncased vocabularies, False for cased ones.
    """
    path = cache_file(lower_case)
    tables = _read_cache(path, lower_case)
    if tables is None:
        tables = compute_codepoint_tables(lower_case)
        _write_cache(path, tables)
    return tables


def cache_file(lower_case):
    """The cache path of one mode's tables.

    It names the Unicode version of this Python and a digest of this module's
    source, so another Python or another version of these rules never reads
    stale tables. The folder is `$BERT_TF_CACHE_DIR`, else
    `$XDG_CACHE_HOME/bert_tf`, else `~/.cache/bert_tf`.

    Args:
      lower_case: True for uncased vocabularies, False for cased ones.
    """
    folder = os.environ.get("BERT_TF_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "bert_tf")
    with open(__file__, "rb") as source:
        digest = hashlib.sha256(source.read()).hexdigest()[:16]
    mode = "uncased" if lower_case else "cased"
    return os.path.join(
        folder, f"codepoint_tables_{mode}_unicode{unicodedata.unidata_version}_{digest}.npz")


_ARRAYS = ("expansion_splits", "expansion_cps", "expansion_kinds", "expansion_offsets",
           "expansion_ccc")


def _read_cache(path, lower_case):
    try:
        with np.load(path, allow_pickle=False) as arrays:
            return CodepointTables(
                lower_case=lower_case,
                unicode_version=unicodedata.unidata_version,
                main=TwoLevelTable(arrays["main_block_index"], arrays["main_blocks"]),
                ordering=TwoLevelTable(arrays["ordering_block_index"],
                                       arrays["ordering_blocks"]),
                **{name: arrays[name] for name in _ARRAYS})
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
        # A torn or foreign file: rebuild rather than trust it.
        logger.warning("rebuilding the code point tables: cache %s is unreadable (%s)",
                       path, error)
        return None


def _write_cache(path, tables):
    arrays = {name: getattr(tables, name) for name in _ARRAYS}
    arrays.update(main_block_index=tables.main.block_index, main_blocks=tables.main.blocks,
                  ordering_block_index=tables.ordering.block_index,
                  ordering_blocks=tables.ordering.blocks)
    partial = None
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        # Written aside then renamed: a concurrent reader sees no file or a whole one.
        handle, partial = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".partial")
        with os.fdopen(handle, "wb") as out:
            np.savez(out, **arrays)
        os.replace(partial, path)
    except OSError as error:
        if partial is not None and os.path.exists(partial):
            os.remove(partial)
        logger.info("code point tables not cached at %s: %s", path, error)


def compute_codepoint_tables(lower_case):
    """Builds the tables for BERT's normalizer from this Python's `unicodedata`.

    Args:
      lower_case: True for uncased vocabularies, False for cased ones.
    """
    sensitive = _reorder_sensitive() if lower_case else frozenset()
    main = np.zeros(NUM_CODEPOINTS, dtype=np.int64)
    ordering = np.full(NUM_CODEPOINTS, 1 | 1 << 4, dtype=np.int64)
    exp_splits, exp_cps, exp_kinds, exp_offsets, exp_ccc = [0], [], [], [], []
    for cp in range(NUM_CODEPOINTS):
        char = chr(cp)
        category = unicodedata.category(char)
        if category in ("Cn", "Co", "Cs"):
            # Unassigned, private use, surrogates: controls to BERT, dropped.
            main[cp] = DROP | FLAG_IGNORABLE
            ordering[cp] = 0
            continue
        if lower_case:
            if cp == CAPITAL_SIGMA:
                main[cp] = SIGMA | _case_flags(char)
                continue
        items, starters, order = _items_and_order(char, lower_case)
        flags = _case_flags(char) if lower_case else 0
        if any(out in sensitive for out, _ in items):
            flags |= FLAG_REORDER
        if not items:
            if lower_case and not is_bert_control(char) and cp not in (0, 0xFFFD):
                # Stripped to nothing (Mn marks): invisible to the sigma rule
                # only if Case_Ignorable, which the flags must then say.
                if not flags & FLAG_IGNORABLE:
                    raise AssertionError(f"U+{cp:04X} vanishes but is not Case_Ignorable")
            main[cp] = DROP | flags | FLAG_IGNORABLE
            ordering[cp] = starters
        elif len(items) == 1:
            out, kind = items[0]
            main[cp] = kind | flags | (out - cp) << PAYLOAD_SHIFT
            offset, ccc = order[0]
            ordering[cp] = starters | offset << 4 | ccc << 8
        else:
            main[cp] = EXPAND | flags | (len(exp_splits) - 1) << PAYLOAD_SHIFT
            ordering[cp] = starters
            for (out, kind), (offset, ccc) in zip(items, order):
                exp_cps.append(out)
                exp_kinds.append(kind)
                exp_offsets.append(offset)
                exp_ccc.append(ccc)
            exp_splits.append(len(exp_cps))
    return CodepointTables(
        lower_case=lower_case,
        unicode_version=unicodedata.unidata_version,
        main=TwoLevelTable.from_dense(main),
        ordering=TwoLevelTable.from_dense(ordering),
        expansion_splits=np.asarray(exp_splits, dtype=np.int32),
        expansion_cps=np.asarray(exp_cps, dtype=np.int32),
        expansion_kinds=np.asarray(exp_kinds, dtype=np.int32),
        expansion_offsets=np.asarray(exp_offsets, dtype=np.int32),
        expansion_ccc=np.asarray(exp_ccc, dtype=np.int32),
    )
