"""A plain-Python re-statement of BERT's reference WordPiece tokenizer.

Written from the semantics of google-research/bert `tokenization.py`
(`FullTokenizer` = `BasicTokenizer` + `WordpieceTokenizer`) to serve as the
oracle for the in-graph tokenizer. It is deliberately slow and literal: one
character at a time, Python's own `str.lower()` and `unicodedata`.
"""

import unicodedata

MAX_INPUT_CHARS_PER_WORD = 100


def _is_whitespace(char):
    """Characters BERT's `_clean_text` turns into a plain space."""
    if char in (" ", "\t", "\n", "\r"):
        return True
    return unicodedata.category(char) == "Zs"


def _is_control(char):
    """Characters BERT's `_clean_text` deletes (\\t \\n \\r are whitespace)."""
    if char in ("\t", "\n", "\r"):
        return False
    return unicodedata.category(char).startswith("C")


def _is_punctuation(char):
    """ASCII non-alphanumeric symbols count as punctuation, as do Unicode P*."""
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _is_chinese_char(cp):
    """The CJK Unified Ideograph blocks BERT splits into single-char words."""
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2B73F
        or 0x2B740 <= cp <= 0x2B81F
        or 0x2B820 <= cp <= 0x2CEAF
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


def _whitespace_tokenize(text):
    # str.split() also splits on U+2028/U+2029 and other isspace() chars.
    return text.strip().split()


def _clean_text(text):
    out = []
    for char in text:
        cp = ord(char)
        if cp == 0 or cp == 0xFFFD or _is_control(char):
            continue
        out.append(" " if _is_whitespace(char) else char)
    return "".join(out)


def _space_chinese_chars(text):
    out = []
    for char in text:
        if _is_chinese_char(ord(char)):
            out.extend((" ", char, " "))
        else:
            out.append(char)
    return "".join(out)


def _strip_accents(text):
    text = unicodedata.normalize("NFD", text)
    return "".join(c for c in text if unicodedata.category(c) != "Mn")


def _split_on_punctuation(text):
    words, current = [], []
    for char in text:
        if _is_punctuation(char):
            if current:
                words.append("".join(current))
                current = []
            words.append(char)
        else:
            current.append(char)
    if current:
        words.append("".join(current))
    return words


def basic_tokenize(text, lower_case=True):
    """Splits `text` (str, or bytes decoded ignoring errors) into words."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "ignore")
    text = _space_chinese_chars(_clean_text(text))
    words = []
    for token in _whitespace_tokenize(text):
        if lower_case:
            token = _strip_accents(token.lower())
        words.extend(_split_on_punctuation(token))
    return _whitespace_tokenize(" ".join(words))


def wordpiece(word, vocab, unk_token="[UNK]"):
    """Greedy longest-match-first split of one word into vocab entries."""
    chars = list(word)
    if len(chars) > MAX_INPUT_CHARS_PER_WORD:
        return [unk_token]
    pieces, start = [], 0
    while start < len(chars):
        end, found = len(chars), None
        while start < end:
            piece = "".join(chars[start:end])
            if start > 0:
                piece = "##" + piece
            if piece in vocab:
                found = piece
                break
            end -= 1
        if found is None:
            return [unk_token]
        pieces.append(found)
        start = end
    return pieces


class ReferenceTokenizer:
    """BERT's FullTokenizer: basic tokenization, then WordPiece per word."""

    def __init__(self, vocab_file, lower_case=True):
        with open(vocab_file, encoding="utf-8") as f:
            tokens = [line.rstrip("\n").strip() for line in f]
        # BERT's load_vocab stops at the first empty read; keep all lines.
        self.vocab = {token: i for i, token in enumerate(tokens)}
        self.inverse = tokens
        self.lower_case = lower_case

    def tokenize(self, text):
        """Word pieces (strings) of `text`."""
        pieces = []
        for word in basic_tokenize(text, self.lower_case):
            pieces.extend(wordpiece(word, self.vocab))
        return pieces

    def encode(self, text):
        """Vocabulary ids of `text`, without special tokens."""
        return [self.vocab[p] for p in self.tokenize(text)]
