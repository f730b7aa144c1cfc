"""In-graph BERT WordPiece tokenizer, exact to google-research/bert's FullTokenizer.

`BertTokenizer` = `BasicTokenizer` (BERT's text normalization and word
splitting, built from per-code-point tables generated with Python's own
`unicodedata` / `str.lower()`) + tensorflow-text's `FastWordpieceTokenizer`
(greedy longest-match-first WordPiece over the already split words).
Everything is TensorFlow ops, so the tokenizer runs inside `tf.function`,
`tf.data.Dataset.map` and SavedModels.

`tokenize` takes one of three exact paths per string:
* printable ASCII: ASCII lower-casing, then end-to-end WordPiece (its
  whitespace/punctuation split is BERT's there, and bytes are chars);
* other text: `BasicTokenizer.normalize`, then end-to-end WordPiece;
* other text when the batch may hold a word over 100 chars (BERT's cap is in
  chars, the op's in bytes): words split in graph, WordPiece per word.
`tokenize_with_offsets` always takes the last path.

Conventions:
* ids are int32 and never contain special tokens; `SegmentPacker` adds them.
* invalid UTF-8 bytes are dropped (decoded to U+FFFD, which BERT drops), like
  `bytes.decode("utf-8", "ignore")` in BERT's `convert_to_unicode`.
* offsets are byte offsets into the original UTF-8 string, end exclusive. A
  word piece covers the original characters its normalized characters came
  from; pieces cut out of one original character (e.g. a Hangul syllable
  decomposed into jamo) both cover that whole character.
"""

import hashlib

import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf.text.basic_tokenizer import BasicTokenizer

PAD_TOKEN = "[PAD]"
UNK_TOKEN = "[UNK]"
CLS_TOKEN = "[CLS]"
SEP_TOKEN = "[SEP]"
MASK_TOKEN = "[MASK]"
SPECIAL_TOKENS = (PAD_TOKEN, UNK_TOKEN, CLS_TOKEN, SEP_TOKEN, MASK_TOKEN)

SUFFIX_INDICATOR = "##"
# BERT's WordpieceTokenizer.max_input_chars_per_word: longer words -> [UNK].
MAX_CHARS_PER_WORD = 100
# FastWordpieceTokenizer limits words in bytes; allow any 100-char word
# (<= 4 bytes per char) and enforce the char limit ourselves.
_MAX_BYTES_PER_WORD = 4 * MAX_CHARS_PER_WORD
# Strings the ASCII shortcut takes: no control chars, nothing to normalize
# but ASCII upper case.
_PRINTABLE_ASCII = "[\\t\\n\\r\\x20-\\x7e]*"
# Replaces words over the char limit: longer than the byte limit -> [UNK].
_TOO_LONG_WORD = "#" * (_MAX_BYTES_PER_WORD + 1)


def parse_vocab_bytes(data: bytes, source: str) -> list[str]:
    """The tokens of a BERT vocab.txt's bytes, parsed as BERT's `load_vocab` does.

    One token per line, surrounding whitespace stripped, bytes that are not
    UTF-8 ignored; the id of a token is its line number (the last line wins
    for a repeated token).

    Args:
      data: the file's bytes.
      source: names the vocabulary in errors (a path, or where the bytes came from).

    Raises:
      ValueError: `data` holds no token.
    """
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()  # the newline ending the last line does not start a token
    tokens = [line.decode("utf-8", "ignore").strip() for line in lines]
    if not tokens:
        raise ValueError(f"vocab file is empty: {source}")
    return tokens


def read_vocab_bytes(vocab_file) -> bytes:
    """The bytes of a vocab file (any file system TensorFlow reads).

    Raises:
      FileNotFoundError: `vocab_file` does not exist.
    """
    vocab_file = str(vocab_file)
    if not tf.io.gfile.exists(vocab_file):
        raise FileNotFoundError(f"vocab file not found: {vocab_file}")
    with tf.io.gfile.GFile(vocab_file, "rb") as f:
        return f.read()


def read_vocab_tokens(vocab_file):
    """Reads a BERT vocab.txt the way BERT's `load_vocab` does (see `parse_vocab_bytes`).

    Returns (tokens, sha256 hex digest of the file).

    Raises:
      FileNotFoundError: `vocab_file` does not exist.
      ValueError: the file holds no token.
    """
    data = read_vocab_bytes(vocab_file)
    return parse_vocab_bytes(data, str(vocab_file)), hashlib.sha256(data).hexdigest()


def _matchable_vocab(tokens):
    """The vocab list handed to FastWordpieceTokenizer.

    That op needs unique tokens; BERT maps a repeated token to its last line.
    Earlier copies (and tokens BERT can never match: "" and "##") become
    unique placeholders containing a space, which words never contain.
    """
    last_line = {token: i for i, token in enumerate(tokens)}
    matchable = []
    for i, token in enumerate(tokens):
        if last_line[token] != i or token in ("", SUFFIX_INDICATOR):
            token = f" <unmatchable {i}>"
        matchable.append(token)
    return matchable


def _fast_wordpiece(tokens, no_pretokenization, max_bytes_per_word):
    return tf_text.FastWordpieceTokenizer(
        vocab=tokens,
        suffix_indicator=SUFFIX_INDICATOR,
        max_bytes_per_word=max_bytes_per_word,
        token_out_type=tf.int32,
        unknown_token=UNK_TOKEN,
        no_pretokenization=no_pretokenization,
    )


class BertTokenizer(tf.Module):
    """BERT WordPiece tokenizer (cased or uncased) made of TensorFlow ops.

    Matches google-research/bert `tokenization.FullTokenizer(vocab_file,
    do_lower_case=lower_case)` id for id.

    Args:
      vocab_file: path of a BERT vocab.txt (one token per line). It must hold
        [PAD], [UNK], [CLS], [SEP] and [MASK].
      lower_case: True for uncased vocabularies (lower-case and strip accents).
      vocab_bytes: instead of `vocab_file`, the bytes of such a file (e.g. a
        vocabulary kept in memory by a Keras layer). Such a tokenizer has no
        `vocab_file` and no `vocab_asset`; everything else is the same.
      vocab_source: names the bytes' origin in errors (with `vocab_bytes`).

    Raises:
      FileNotFoundError: the vocab file does not exist.
      ValueError: both or neither of `vocab_file` and `vocab_bytes`; the
        vocabulary is empty or lacks a special token.

    Examples:
        `vocab_file` is the path of a BERT vocab.txt, here bert-base-uncased's:

        >>> from bert_tf.text.tokenizer import BertTokenizer
        >>> tokenizer = BertTokenizer(vocab_file, lower_case=True)
        >>> ids = tokenizer.tokenize(["Hello, world!", "Tokenization"])
        >>> ids.to_list()
        [[7592, 1010, 2088, 999], [19204, 3989]]
        >>> tokenizer.id_to_token(ids).to_list()
        [[b'hello', b',', b'world', b'!'], [b'token', b'##ization']]
        >>> tokenizer.detokenize(ids).numpy().tolist()
        [b'hello , world !', b'tokenization']
        >>> tokenizer.cls_id, tokenizer.sep_id
        (101, 102)
    """

    def __init__(self, vocab_file=None, lower_case=True, name=None, *,
                 vocab_bytes: bytes | None = None, vocab_source: str = "vocabulary bytes"):
        super().__init__(name=name)
        if (vocab_file is None) == (vocab_bytes is None):
            raise ValueError("BertTokenizer takes exactly one of vocab_file and vocab_bytes")
        self.lower_case = bool(lower_case)
        if vocab_file is not None:
            vocab_source = str(vocab_file)
            vocab_bytes = read_vocab_bytes(vocab_file)
        tokens = parse_vocab_bytes(vocab_bytes, vocab_source)
        self._vocab_sha256 = hashlib.sha256(vocab_bytes).hexdigest()
        self._vocab = tuple(tokens)
        self._token_ids = {token: i for i, token in enumerate(tokens)}
        missing = [t for t in SPECIAL_TOKENS if t not in self._token_ids]
        if missing:
            raise ValueError(
                f"vocab file {vocab_source} lacks special token(s) {', '.join(missing)}"
            )
        self.vocab_file = None if vocab_file is None else str(vocab_file)
        # Copies the vocab file into a SavedModel that tracks this module.
        self.vocab_asset = (None if vocab_file is None
                            else tf.saved_model.Asset(self.vocab_file))
        self._basic = BasicTokenizer(lower_case=self.lower_case)
        matchable = _matchable_vocab(tokens)
        # Over pre-split words (the exact general path, and offsets).
        self._wordpiece = _fast_wordpiece(
            matchable, no_pretokenization=True, max_bytes_per_word=_MAX_BYTES_PER_WORD
        )
        # End to end over normalized text: its own split on whitespace,
        # punctuation and CJK is exactly BERT's on that text (a test checks
        # every code point), and it is cheaper than grouping words in graph.
        self._wordpiece_e2e = _fast_wordpiece(
            matchable, no_pretokenization=False, max_bytes_per_word=_MAX_BYTES_PER_WORD
        )
        # For printable ASCII text, where bytes are chars: BERT's 100-char
        # word cap is FastWordpieceTokenizer's byte cap.
        self._wordpiece_ascii = _fast_wordpiece(
            matchable, no_pretokenization=False, max_bytes_per_word=MAX_CHARS_PER_WORD
        )
        self._id_to_token = tf.constant(tokens, tf.string)

    # --- vocabulary -----------------------------------------------------

    @property
    def vocab(self):
        """The tokens, indexed by id (a tuple of str)."""
        return self._vocab

    @property
    def vocab_size(self):
        """Number of ids: every id is in [0, vocab_size)."""
        return len(self._vocab)

    @property
    def unicode_version(self):
        """Unicode version of the Python `unicodedata` the tables came from."""
        return self._basic.unicode_version

    def token_to_id(self, token):
        """Id of a token string (Python); KeyError naming it if absent."""
        try:
            return self._token_ids[token]
        except KeyError:
            raise KeyError(f"token {token!r} is not in the vocabulary") from None

    @property
    def pad_id(self):
        return self._token_ids[PAD_TOKEN]

    @property
    def unk_id(self):
        return self._token_ids[UNK_TOKEN]

    @property
    def cls_id(self):
        return self._token_ids[CLS_TOKEN]

    @property
    def sep_id(self):
        return self._token_ids[SEP_TOKEN]

    @property
    def mask_id(self):
        return self._token_ids[MASK_TOKEN]

    def tokenizer_contract(self):
        """What a model trained with this tokenizer depends on, as a dict.

        Same keys and values as `tokenizer_contract.contract_from_vocab`:
        vocab_sha256 (of the file bytes), vocab_size, lower_case and
        special_token_ids ({"[PAD]": id, ...}).
        """
        return {
            "vocab_sha256": self._vocab_sha256,
            "vocab_size": self.vocab_size,
            "lower_case": self.lower_case,
            "special_token_ids": {t: self._token_ids[t] for t in SPECIAL_TOKENS},
        }

    # --- graph ops ------------------------------------------------------
    # The graph methods use tf.cond, never Python control flow on tensors, so
    # AutoGraph has nothing to convert: left to it, converting this module's
    # code took ~6 s of every trace (each tf.function, tf.data map or Keras
    # predict/fit function that tokenizes).

    @tf.autograph.experimental.do_not_convert
    def tokenize(self, strings):
        """WordPiece ids of each string (no special tokens).

        Args:
          strings: string Tensor of shape [B] (or a scalar).

        Returns:
          int32 RaggedTensor [B, (T)], or a 1-D int32 Tensor [T] for a scalar.
        """
        return self._per_rank(strings, self._tokenize_fast)

    @tf.autograph.experimental.do_not_convert
    def tokenize_with_offsets(self, strings):
        """Like `tokenize`, plus byte offsets of each piece in its string.

        Returns:
          (ids, starts, ends): ids int32, starts/ends int64 byte offsets into
          the original UTF-8 string (end exclusive), all shaped like
          `tokenize`'s result.
        """
        return self._per_rank(strings, lambda batch: self._tokenize(batch, True))

    @tf.autograph.experimental.do_not_convert
    def detokenize(self, ids):
        """Joins ids back into text: tokens separated by spaces, "##" glued.

        Args:
          ids: int RaggedTensor/Tensor [B, (T)], or a 1-D Tensor [T].

        Returns:
          string Tensor [B] (a scalar for 1-D ids). Ids must be in range.
        """
        tokens = self.id_to_token(ids)
        joined = tf.strings.reduce_join(tokens, axis=-1, separator=" ")
        return tf.strings.regex_replace(joined, " " + SUFFIX_INDICATOR, "")

    def id_to_token(self, ids):
        """Token strings for int ids (Tensor or RaggedTensor, any shape)."""
        if isinstance(ids, tf.RaggedTensor):
            return tf.ragged.map_flat_values(self.id_to_token, ids)
        return tf.gather(self._id_to_token, ids)

    def _per_rank(self, strings, fn):
        strings = tf.convert_to_tensor(strings, tf.string)
        rank = strings.shape.rank
        if rank == 0:
            result = fn(strings[None])
            return tf.nest.map_structure(lambda r: r[0], result)
        if rank == 1:
            return fn(strings)
        raise ValueError(
            f"BertTokenizer takes a scalar or 1-D string tensor, got shape {strings.shape}"
        )

    def _tokenize_fast(self, strings):
        """`tokenize` for a batch: printable ASCII strings take a shortcut."""
        is_ascii = tf.strings.regex_full_match(strings, _PRINTABLE_ASCII)

        def mixed():
            ascii_index = tf.where(is_ascii)[:, 0]
            other_index = tf.where(~is_ascii)[:, 0]
            merged = tf.concat(
                [
                    self._tokenize_ascii(tf.gather(strings, ascii_index)),
                    self._tokenize_unicode(tf.gather(strings, other_index)),
                ],
                axis=0,
            )
            # Row i of `merged` is string order[i]: put rows back in place.
            order = tf.concat([ascii_index, other_index], 0)
            return tf.gather(merged, tf.math.invert_permutation(order))

        return tf.cond(
            tf.reduce_all(is_ascii), lambda: self._tokenize_ascii(strings), mixed
        )

    def _tokenize_ascii(self, strings):
        """Printable ASCII (plus \t \n \r): BERT's normalization is at most
        ASCII lower-casing, and FastWordpieceTokenizer's own split on
        whitespace and ASCII punctuation is BERT's."""
        if self.lower_case:
            strings = tf.strings.lower(strings)
        return self._wordpiece_ascii.tokenize(strings)

    def _tokenize_unicode(self, strings):
        """Any text: graph normalization, then end-to-end WordPiece."""
        normalized, may_have_long_word = self._basic.normalize(strings, MAX_CHARS_PER_WORD)
        # FastWordpieceTokenizer caps words in bytes, BERT in chars: a batch
        # that may hold a word over the char cap takes the per-word path.
        return tf.cond(
            may_have_long_word,
            lambda: self._tokenize(strings, with_offsets=False),
            lambda: self._wordpiece_e2e.tokenize(normalized),
        )

    def _tokenize(self, strings, with_offsets):
        split = self._basic.split(strings, with_offsets=with_offsets)
        words = split.words  # [W, (chars)]
        num_chars = words.row_lengths()
        too_long = num_chars > MAX_CHARS_PER_WORD
        word_strings = tf.strings.unicode_encode(words, "UTF-8")
        word_strings = tf.where(too_long, _TOO_LONG_WORD, word_strings)

        def per_string(pieces):
            # [W, (P)] pieces per word -> [B, (T)] pieces per string.
            return tf.RaggedTensor.from_row_splits(
                pieces.values,
                tf.gather(pieces.row_splits, split.word_row_splits),
                validate=False,
            )

        if not with_offsets:
            return per_string(self._wordpiece.tokenize(word_strings))

        pieces, piece_starts, piece_ends = self._wordpiece.tokenize_with_offsets(word_strings)
        first_char, last_char = _piece_char_span(words, too_long, pieces, piece_starts, piece_ends)
        starts = pieces.with_values(tf.gather(split.char_starts, first_char))
        ends = pieces.with_values(tf.gather(split.char_ends, last_char))
        return per_string(pieces), per_string(starts), per_string(ends)


def _piece_char_span(words, too_long, pieces, piece_starts, piece_ends):
    """First and last (flat) word-char index of each piece.

    FastWordpieceTokenizer gives byte offsets inside the encoded word; map
    them back to characters through a byte -> char table of the batch.
    """
    char_bytes = tf.cast(
        1
        + tf.cast(words.values >= 0x80, tf.int32)
        + tf.cast(words.values >= 0x800, tf.int32)
        + tf.cast(words.values >= 0x10000, tf.int32),
        tf.int64,
    )  # [C]
    char_byte_pos = tf.cumsum(char_bytes, exclusive=True)  # [C]
    byte_to_char = tf.repeat(tf.range(tf.size(char_bytes, out_type=tf.int64)), char_bytes)
    word_first = words.row_starts()  # [W]
    piece_word = pieces.value_rowids()  # [P]
    piece_first = tf.gather(word_first, piece_word)
    base = tf.gather(char_byte_pos, piece_first)
    piece_long = tf.gather(too_long, piece_word)
    # Too-long words were replaced by a sentinel: their one [UNK] spans the word.
    zero = tf.zeros_like(base)
    start_byte = tf.where(piece_long, zero, base + tf.cast(piece_starts.values, tf.int64))
    end_byte = tf.where(piece_long, zero, base + tf.cast(piece_ends.values, tf.int64) - 1)
    first = tf.where(piece_long, piece_first, tf.gather(byte_to_char, start_byte))
    last_of_word = piece_first + tf.gather(words.row_lengths(), piece_word) - 1
    last = tf.where(piece_long, last_of_word, tf.gather(byte_to_char, end_byte))
    return first, last
