"""Learns a BERT WordPiece vocabulary from text files (an offline tool's library).

Three steps:

1. Pre-tokenization with BERT's basic tokenization (google-research/bert
   `BasicTokenizer`): drop control characters, map whitespace to spaces, put
   spaces around CJK ideographs, split on whitespace, lower-case and strip
   accents (uncased vocabularies only), split off every punctuation
   character. This is a plain-Python rendering for counting words offline,
   sharing its character classes with the in-graph tokenizer
   (`bert_tf.text.codepoint_tables`).
2. Learning: starting from every character of the corpus in both its
   word-initial form (`c`) and its continuation form (`##c`; not for
   punctuation and CJK ideographs, which are always words of their own),
   the most frequent pair of adjacent pieces (weighted by word counts) is
   merged into a new piece, again and again, until the vocabulary has the
   requested size.
   These are byte-pair-encoding merges written out in WordPiece's `##`
   notation. Because every character is in the vocabulary in both forms, any
   word made of known characters tokenizes without `[UNK]`.
3. Layout, as in Google's BERT vocabularies: `[PAD]` = 0,
   `[unused0]`..`[unused{R-1}]` = 1..R, then `[UNK]`, `[CLS]`, `[SEP]`,
   `[MASK]` (ids 100-103 with the default R = 99), then the learned pieces.
   Extra `[unusedN]` tokens fill the end of the file when the corpus is too
   small for the requested size, or to round the size up to a multiple (say
   of 8 or 128, which suits matrix units).

Why not `tensorflow_text.tools.wordpiece_vocab.bert_vocab_from_dataset`: it
exists in tensorflow-text 2.20.1, but its binary search over count thresholds
re-learns the vocabulary about ten times, took 22 s on Moby-Dick and 67 s on
the State of the Union corpus on this machine, and returns only an
approximate size (3,214 pieces for a 4,000 target). The merge learner here
gives the exact size with one pass.
"""

import collections
import heapq
import time
import unicodedata

from bert_tf import storage
from bert_tf.file_patterns import expand_file_patterns

# One definition of BERT's character classes for the whole package: the
# in-graph tokenizer's tables are built from the same predicates.
from bert_tf.text.codepoint_tables import (
    is_bert_control,
    is_bert_punctuation,
    is_bert_whitespace,
    is_cjk,
)

SPECIAL_TOKENS = ("[UNK]", "[CLS]", "[SEP]", "[MASK]")
PAD_TOKEN = "[PAD]"
UNK_TOKEN = "[UNK]"
CONTINUATION_PREFIX = "##"
# BERT's WordPiece maps a longer word to [UNK]; such words teach nothing.
MAX_WORD_CHARS = 100

# ASCII fast path of the text cleaning: delete control characters, map tab,
# newline and carriage return to spaces (as BERT's `_clean_text` does).
_ASCII_CLEANING = {
    code: (" " if chr(code) in "\t\n\r" else None) for code in list(range(32)) + [127]
}

# --- pre-tokenization ------------------------------------------------------


def basic_tokenize(text, lower_case=True):
    """BERT's basic tokenization of a string into words and punctuation.

    Args:
      text: a `str`.
      lower_case: lower-case and strip accents (uncased vocabularies).

    Returns:
      A list of strings, e.g. `["hello", ",", "world", "!"]`.
    """
    words = []
    for token in clean_text(text).split():
        words.extend(split_word(token, lower_case))
    return words


def clean_text(text):
    """Drops control characters, maps whitespace to " " and spaces out CJK ideographs."""
    if text.isascii():
        return text.translate(_ASCII_CLEANING)
    pieces = []
    for char in text:
        code = ord(char)
        if code == 0 or code == 0xFFFD or is_bert_control(char):
            continue
        if is_bert_whitespace(char):
            pieces.append(" ")
        elif is_cjk(code):
            pieces.append(f" {char} ")
        else:
            pieces.append(char)
    return "".join(pieces)


def split_word(token, lower_case=True):
    """Basic-tokenizes one whitespace-free token of cleaned text."""
    if lower_case:
        token = token.lower()
        if not token.isascii():
            token = "".join(
                c for c in unicodedata.normalize("NFD", token) if unicodedata.category(c) != "Mn"
            )
    pieces = []
    current = []
    for char in token:
        if is_bert_punctuation(char):
            if current:
                pieces.append("".join(current))
                current = []
            pieces.append(char)
        else:
            current.append(char)
    if current:
        pieces.append("".join(current))
    # Lower-casing can produce whitespace-like characters; BERT re-splits.
    return " ".join(pieces).split()


# --- reading and counting ---------------------------------------------------


def list_text_files(file_patterns):
    """Expands input text file patterns; see `bert_tf.file_patterns.expand_file_patterns`."""
    return expand_file_patterns(file_patterns, kind="input")


def iter_lines(files, max_lines=None):
    """Yields the lines of `files` in order, at most `max_lines` in all.

    Invalid UTF-8 is replaced by U+FFFD, which `clean_text` then drops, as
    BERT's reader ignores undecodable bytes.
    """
    emitted = 0
    for path in files:
        with storage.open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if max_lines is not None and emitted >= max_lines:
                    return
                emitted += 1
                yield line


def count_words(lines, lower_case=True, progress=None):
    """Counts basic-tokenized words.

    Whitespace-separated tokens are counted first (in C, via `Counter`), and
    each distinct token is basic-tokenized once: natural text repeats its
    tokens, so this is several times faster than tokenizing every line.
    Memory grows with the number of distinct whitespace tokens (tens of
    millions for a full Wikipedia); use `max_lines` of `iter_lines` to bound it.

    Args:
      lines: an iterable of strings.
      lower_case: as in `basic_tokenize`.
      progress: optional `Progress`, told the number of lines read so far.

    Returns:
      `(word_counts, lines_read)`: a `collections.Counter` of words and the
      number of lines read.
    """
    raw_counts = collections.Counter()
    lines_read = 0
    for line in lines:
        raw_counts.update(clean_text(line).split())
        lines_read += 1
        if progress is not None and lines_read % 10000 == 0:
            progress.report(f"read {lines_read:,} lines, {len(raw_counts):,} distinct tokens")
    word_counts = collections.Counter()
    for token, count in raw_counts.items():
        for word in split_word(token, lower_case):
            word_counts[word] += count
    return word_counts, lines_read


# --- learning -----------------------------------------------------------------


def alphabet(word_counts, max_alphabet=1000):
    """The most frequent characters of the corpus (count, then code point, order)."""
    char_counts = collections.Counter()
    for word, count in word_counts.items():
        if len(word) <= MAX_WORD_CHARS:
            for char in word:
                char_counts[char] += count
    ranked = sorted(char_counts.items(), key=lambda item: (-item[1], item[0]))
    return [char for char, _ in ranked[:max_alphabet]]


def learn_wordpiece(word_counts, num_pieces, max_alphabet=1000, progress=None):
    """Learns `num_pieces` WordPiece pieces from word counts.

    Args:
      word_counts: a mapping word -> count (basic-tokenized words).
      num_pieces: how many pieces to return (special tokens not included).
      max_alphabet: at most this many distinct characters are kept (the most
        frequent); words with other characters are left out of learning and
        will map to `[UNK]`.
      progress: optional `Progress`.

    Returns:
      The pieces: each alphabet character, then each as a `##` continuation
      (except punctuation and CJK ideographs, which basic tokenization keeps
      apart), then merged pieces in the order they were learned (most frequent
      first). Fewer than `num_pieces` when the corpus runs out of pairs (every
      word is then a single piece).

    Raises:
      ValueError: `num_pieces` cannot hold the alphabet in both forms.
    """
    chars = alphabet(word_counts, max_alphabet)
    # Basic tokenization isolates punctuation and CJK ideographs, so they
    # never continue a word: their "##" forms would be dead entries.
    continuations = [
        CONTINUATION_PREFIX + c for c in chars if not (is_bert_punctuation(c) or is_cjk(ord(c)))
    ]
    if num_pieces < len(chars) + len(continuations):
        raise ValueError(
            f"Room for {num_pieces} learned pieces cannot hold the {len(chars)} characters "
            f"of the corpus ({len(chars) + len(continuations)} pieces with their '##' "
            "forms): raise the vocabulary size or lower max_alphabet."
        )
    pieces = chars + continuations
    known = set(pieces)
    allowed = set(chars)

    # Each word as its current list of pieces; `where[pair]` lists the words
    # holding that adjacent pair, so a merge only revisits those words.
    words = []
    for word, count in sorted(word_counts.items()):
        if len(word) <= MAX_WORD_CHARS and all(c in allowed for c in word):
            words.append(([word[0]] + [CONTINUATION_PREFIX + c for c in word[1:]], count))
    pair_counts = collections.defaultdict(int)
    where = collections.defaultdict(set)
    for index, (symbols, count) in enumerate(words):
        for pair in zip(symbols, symbols[1:]):
            pair_counts[pair] += count
            where[pair].add(index)
    # A max-heap with lazy deletion: entries whose count is out of date are
    # skipped when popped. Ties go to the smallest pair, for reproducibility.
    heap = [(-count, pair) for pair, count in pair_counts.items()]
    heapq.heapify(heap)

    while len(pieces) < num_pieces and heap:
        negative_count, pair = heapq.heappop(heap)
        if pair_counts.get(pair) != -negative_count:
            continue
        merged = pair[0] + pair[1][len(CONTINUATION_PREFIX) :]
        touched = set()
        for index in where.pop(pair):
            symbols, count = words[index]
            for old in zip(symbols, symbols[1:]):
                pair_counts[old] -= count
                where[old].discard(index)
                touched.add(old)
            symbols = _merge_pair(symbols, pair, merged)
            words[index] = (symbols, count)
            for new in zip(symbols, symbols[1:]):
                pair_counts[new] += count
                where[new].add(index)
                touched.add(new)
        pair_counts.pop(pair, None)
        touched.discard(pair)
        for other in touched:
            count = pair_counts.get(other, 0)
            if count > 0:
                heapq.heappush(heap, (-count, other))
            else:
                pair_counts.pop(other, None)
                where.pop(other, None)
        # Different merge paths can spell the same piece ("ab"+"##c" and
        # "a"+"##bc"); it is one vocabulary entry.
        if merged not in known:
            known.add(merged)
            pieces.append(merged)
            if progress is not None and len(pieces) % 500 == 0:
                progress.report(f"learned {len(pieces):,} of {num_pieces:,} pieces")
    return pieces


def _merge_pair(symbols, pair, merged):
    result = []
    i = 0
    while i < len(symbols):
        if i + 1 < len(symbols) and symbols[i] == pair[0] and symbols[i + 1] == pair[1]:
            result.append(merged)
            i += 2
        else:
            result.append(symbols[i])
            i += 1
    return result


# --- vocabulary layout ----------------------------------------------------------


def special_tokens(num_reserved=99):
    """`[PAD]`, `[unused0]`..`[unused{num_reserved-1}]`, `[UNK]`, `[CLS]`, `[SEP]`, `[MASK]`."""
    return [PAD_TOKEN] + [f"[unused{i}]" for i in range(num_reserved)] + list(SPECIAL_TOKENS)


def build_vocab(
    word_counts, vocab_size, num_reserved=99, pad_to_multiple_of=1, max_alphabet=1000, progress=None
):
    """Learns a complete vocabulary: special tokens, learned pieces, padding.

    Args:
      word_counts: a mapping word -> count (see `count_words`).
      vocab_size: the size wanted, special and reserved tokens included.
      num_reserved: how many `[unusedN]` slots follow `[PAD]`.
      pad_to_multiple_of: round the final size up to a multiple of this, with
        more `[unusedN]` tokens at the end.
      max_alphabet: see `learn_wordpiece`.
      progress: optional `Progress`.

    Returns:
      The vocabulary as a list of unique strings: `vocab_size` entries, or
      the next multiple of `pad_to_multiple_of`.

    Raises:
      ValueError: a size or count out of range, or no words to learn from.
    """
    if num_reserved < 0:
        raise ValueError(f"num_reserved must be non-negative, got {num_reserved}.")
    if pad_to_multiple_of < 1:
        raise ValueError(f"pad_to_multiple_of must be at least 1, got {pad_to_multiple_of}.")
    if not word_counts:
        raise ValueError("No words to learn a vocabulary from: the input text is empty.")
    specials = special_tokens(num_reserved)
    if vocab_size <= len(specials):
        raise ValueError(
            f"vocab_size {vocab_size} leaves no room for learned pieces after the "
            f"{len(specials)} special and reserved tokens."
        )
    try:
        pieces = learn_wordpiece(word_counts, vocab_size - len(specials), max_alphabet, progress)
    except ValueError as error:
        raise ValueError(f"vocab_size {vocab_size} is too small: {error}") from None
    vocab = specials + pieces
    target = -(-vocab_size // pad_to_multiple_of) * pad_to_multiple_of
    next_unused = num_reserved
    while len(vocab) < target:
        vocab.append(f"[unused{next_unused}]")
        next_unused += 1
    return vocab


def write_vocab(vocab, path):
    """Writes one token per line (UTF-8); the line number is the token id."""
    if len(set(vocab)) != len(vocab):
        duplicates = [t for t, n in collections.Counter(vocab).items() if n > 1]
        raise ValueError(f"Vocabulary has duplicate tokens: {duplicates[:5]}")
    with storage.open(path, "w", encoding="utf-8", newline="\n") as handle:
        for token in vocab:
            handle.write(token + "\n")


# --- coverage -------------------------------------------------------------------


def wordpiece_tokenize(word, vocab):
    """Greedy longest-match-first WordPiece of one word, as BERT does.

    Returns the pieces, or `[UNK_TOKEN]` when some part of the word has no
    piece or the word is longer than `MAX_WORD_CHARS`.
    """
    if len(word) > MAX_WORD_CHARS:
        return [UNK_TOKEN]
    pieces = []
    start = 0
    while start < len(word):
        end = len(word)
        while end > start:
            piece = word[start:end]
            if start > 0:
                piece = CONTINUATION_PREFIX + piece
            if piece in vocab:
                break
            end -= 1
        if end == start:
            return [UNK_TOKEN]
        pieces.append(piece)
        start = end
    return pieces


def unk_rate(word_counts, vocab):
    """Fraction of word occurrences that WordPiece maps to `[UNK]`."""
    vocab = set(vocab)
    total = sum(word_counts.values())
    unknown = sum(
        count
        for word, count in word_counts.items()
        if wordpiece_tokenize(word, vocab) == [UNK_TOKEN]
    )
    return unknown / total if total else 0.0


class Progress:
    """Throttled progress messages: `report` passes a message on at most once per interval."""

    def __init__(self, write, interval_seconds=10.0):
        self._write = write
        self._interval = interval_seconds
        self._last = None

    def report(self, message):
        """Writes `message` if `interval_seconds` passed since the last one written."""
        now = time.monotonic()
        if self._last is None or now - self._last >= self._interval:
            self._last = now
            self._write(message)
