"""Raw text -> encoder inputs, as a Keras 3 layer that saves its vocabulary.

The layer wraps the library's in-graph `BertTokenizer` and `SegmentPacker`,
the same two the trainer's input pipelines and the SavedModel exports use,
so a Keras model that starts with it tokenizes and truncates text exactly as
training did: `keras.Sequential([preprocessor, classifier])` takes strings.

The vocabulary travels with the layer through Keras's asset mechanism:
`save_assets` writes the vocab file's bytes into the `.keras` archive and
`load_assets` reads them back, so a reloaded layer has the same tokens and
the same tokenizer contract (the sha256 of those bytes). The config holds
no path.

Tensor legend: B batch, S max_seq_length.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from bert_tf import storage
from bert_tf.text.segment_packer import SEQUENCE_KEYS, SegmentPacker
from bert_tf.text.tokenizer import BertTokenizer, read_vocab_bytes

# The file `save_assets` writes and `load_assets` reads.
VOCAB_ASSET = "vocab.txt"


@keras.saving.register_keras_serializable(package="bert_tf")
class TextPreprocessor(keras.layers.Layer):
    r"""Tokenizes and packs one text, or a pair of texts, into BERT encoder inputs.

    Call it on a string batch [B] (or [B, 1], a scalar, a Python str or list
    of str) for single texts, or on a tuple `(first, second)` of two such
    batches for pairs:

        [CLS] first [SEP]                [CLS] first [SEP] second [SEP]

    truncated longest-first to `max_seq_length` as google-research/bert's
    `_truncate_seq_pair`. Returns a dict of int32 `token_ids`, `segment_ids`
    and `padding_mask` [B, S] (S = `max_seq_length`, or the batch's longest
    text rounded up to `pad_to_multiple`), what `BertEncoder` and every task
    model take. The layer holds no weights and runs on the CPU; XLA cannot
    compile string ops, so a model holding it trains without `jit_compile`.

    Args:
      vocab_file: the BERT vocab.txt (one token per line, [PAD], [UNK],
        [CLS], [SEP] and [MASK] among them), read once, here. None makes a
        layer without vocabulary, as `from_config` does before `load_assets`;
        calling it is an error until then.
      lower_case: True for uncased vocabularies (lower-case and strip accents).
      max_seq_length: the packed length, [CLS] and [SEP] included (>= 2;
        >= 3 for pairs).
      pad_to_multiple: None pads every batch to `max_seq_length`; a number m
        pads a batch only to its longest text rounded up to a multiple of m,
        so short texts run short (the outputs at real tokens are the same).
      **kwargs: `keras.layers.Layer` arguments (`name`, ...).

    Raises:
      FileNotFoundError: `vocab_file` does not exist (the message names it).
      ValueError: the vocabulary lacks a special token, or a length is invalid.

    Examples:
        A tiny vocabulary (yours is the checkpoint's vocab.txt):

        >>> import os, tempfile
        >>> from bert_tf.layers import TextPreprocessor
        >>> tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "##s"]
        >>> vocab_file = os.path.join(tempfile.mkdtemp(), "vocab.txt")
        >>> with open(vocab_file, "w") as f:
        ...     print(*tokens, sep="\n", file=f)
        >>> preprocessor = TextPreprocessor(vocab_file, max_seq_length=8)
        >>> features = preprocessor(["The cats sat", "a cat"])  # "a" is [UNK]
        >>> features["token_ids"].numpy().tolist()
        [[2, 5, 6, 8, 7, 3, 0, 0], [2, 1, 6, 3, 0, 0, 0, 0]]
        >>> features["padding_mask"].numpy().tolist()
        [[1, 1, 1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 0, 0, 0, 0]]
        >>> pair = preprocessor((["the cat"], ["sat"]))  # [CLS] the cat [SEP] sat [SEP]
        >>> pair["segment_ids"].numpy().tolist()
        [[0, 0, 0, 0, 1, 1, 0, 0]]
    """

    def __init__(self, vocab_file: str | None = None, lower_case: bool = True,
                 max_seq_length: int = 128, pad_to_multiple: int | None = None, **kwargs):
        super().__init__(**kwargs)
        # Built by nature: no weights, and `build` could not know the pair-ness anyway.
        self.built = True
        # String ops have no XLA kernels: Keras's jit_compile="auto" checks this flag.
        self.supports_jit = False
        if max_seq_length < 2:
            raise ValueError(f"TextPreprocessor: max_seq_length must be >= 2 for [CLS] and "
                             f"[SEP], got {max_seq_length}")
        if pad_to_multiple is not None and pad_to_multiple < 1:
            raise ValueError(f"TextPreprocessor: pad_to_multiple must be >= 1 or None, "
                             f"got {pad_to_multiple}")
        self.lower_case = bool(lower_case)
        self.max_seq_length = int(max_seq_length)
        self.pad_to_multiple = pad_to_multiple
        # The tokenizer and packer (which needs the special tokens' ids) come
        # with the vocabulary: here, or in `load_assets`.
        self._vocab_bytes: bytes | None = None
        self._tokenizer: BertTokenizer | None = None
        self._packer: SegmentPacker | None = None
        if vocab_file is not None:
            self._set_vocabulary(read_vocab_bytes(vocab_file), str(vocab_file))

    def _set_vocabulary(self, vocab_bytes: bytes, source: str) -> None:
        """Builds the tokenizer and packer from a vocab file's bytes."""
        tokenizer = BertTokenizer(lower_case=self.lower_case, vocab_bytes=vocab_bytes,
                                  vocab_source=source)
        self._packer = SegmentPacker.from_tokenizer(tokenizer, self.max_seq_length,
                                                    pad_to_multiple=self.pad_to_multiple)
        self._tokenizer = tokenizer
        self._vocab_bytes = vocab_bytes

    # --- vocabulary ---------------------------------------------------------

    @property
    def tokenizer(self) -> BertTokenizer:
        """The `BertTokenizer` (its `tokenizer_contract()` is the model's contract).

        Raises:
          ValueError: the layer has no vocabulary yet.
        """
        if self._tokenizer is None:
            raise self._no_vocabulary()
        return self._tokenizer

    def _no_vocabulary(self) -> ValueError:
        return ValueError(f"TextPreprocessor {self.name!r} has no vocabulary: build it with "
                          "vocab_file=..., or load it with the .keras file it was saved in")

    @property
    def has_vocabulary(self) -> bool:
        """False only between `from_config` and `load_assets` (or with vocab_file=None)."""
        return self._tokenizer is not None

    @property
    def vocab_size(self) -> int:
        """Number of token ids the layer can produce."""
        return self.tokenizer.vocab_size

    def save_assets(self, dir_path: str) -> None:
        """Keras saving: writes the vocabulary's bytes as `dir_path/vocab.txt`.

        Raises:
          ValueError: the layer has no vocabulary.
        """
        if self._vocab_bytes is None:
            raise self._no_vocabulary()
        with storage.open(storage.join(dir_path, VOCAB_ASSET), "wb") as f:
            f.write(self._vocab_bytes)

    def load_assets(self, dir_path: str) -> None:
        """Keras loading: reads `dir_path/vocab.txt` (a temporary folder) into memory.

        Raises:
          FileNotFoundError: the saved file holds no vocabulary for this layer.
        """
        path = storage.join(dir_path, VOCAB_ASSET)
        if not storage.isfile(path):
            raise FileNotFoundError(
                f"TextPreprocessor {self.name!r}: the saved model has no {VOCAB_ASSET} "
                f"among its assets ({path}); was it saved by bert_tf's TextPreprocessor?")
        self._set_vocabulary(storage.read_bytes(path),
                             f"{VOCAB_ASSET} of the saved TextPreprocessor")

    # --- call ----------------------------------------------------------------

    def __call__(self, inputs, **kwargs):
        # Checked here, before Keras wraps what `call` raises in several lines.
        # Keras takes only tensors positionally: Python strings and NumPy
        # arrays become string tensors first.
        segments = [_checked_strings(segment, self.name) for segment in _segments(inputs)]
        if len(segments) not in (1, 2):
            raise ValueError(f"TextPreprocessor {self.name!r} takes one text or a pair of "
                             f"texts (a tuple of two string batches), got {len(segments)} "
                             "inputs")
        if len(segments) == 2 and self.max_seq_length < 3:
            raise ValueError(f"TextPreprocessor {self.name!r}: max_seq_length must be >= 3 "
                             f"for a pair of texts, got {self.max_seq_length}")
        symbolic = keras.backend.is_keras_tensor(segments[0])
        if not symbolic and self._tokenizer is None:
            raise self._no_vocabulary()
        return super().__call__(segments[0] if len(segments) == 1 else tuple(segments),
                                **kwargs)

    # Graph ops only (tf.cond inside the tokenizer): nothing for AutoGraph to convert.
    @tf.autograph.experimental.do_not_convert
    def call(self, inputs) -> dict[str, tf.Tensor]:
        """Packs `inputs` (checked by `__call__`) into int32 features [B, S]."""
        tokenizer = self.tokenizer
        segments = [_as_batch(segment) for segment in _segments(inputs)]
        # Tokenization has CPU kernels only.
        with tf.device("/cpu:0"):
            unbatched = segments[0].shape.rank == 0
            if unbatched:
                segments = [segment[None] for segment in segments]
            features = self._packer([tokenizer.tokenize(segment) for segment in segments])
            if unbatched:
                features = {key: value[0] for key, value in features.items()}
        return features

    def compute_output_spec(self, inputs) -> dict[str, keras.KerasTensor]:
        """The output structure, from the config alone (no vocabulary needed)."""
        batch = _batch_shape(tuple(_segments(inputs)[0].shape))
        length = self.max_seq_length if self.pad_to_multiple is None else None
        return {key: keras.KerasTensor(batch + (length,), dtype="int32")
                for key in SEQUENCE_KEYS}

    def get_config(self) -> dict:
        config = super().get_config()
        # The vocabulary is an asset, not a path: the config must load anywhere.
        config.update(vocab_file=None, lower_case=self.lower_case,
                      max_seq_length=self.max_seq_length,
                      pad_to_multiple=self.pad_to_multiple)
        return config


def _segments(inputs) -> list:
    """One batch, or the two batches of a pair, as a list.

    A list or tuple of Python strings is one batch of texts; any other list or
    tuple lists the segments.
    """
    if isinstance(inputs, (list, tuple)) and not all(
            isinstance(item, (str, bytes)) for item in inputs):
        return list(inputs)
    return [inputs]


def _not_strings(layer_name: str, got: str) -> str:
    return (f"TextPreprocessor {layer_name!r} takes strings: a string batch [batch] (or "
            f"[batch, 1]), or a tuple of two for text pairs; got {got}")


def _batch_shape(shape: tuple) -> tuple:
    """The batch part of an accepted input's shape: () or (B,); a trailing 1 is dropped."""
    return shape[:1] if len(shape) == 2 and shape[1] == 1 else shape


def _checked_strings(segment, layer_name: str):
    """`segment` as a (symbolic or real) string tensor of an accepted shape.

    Raises:
      TypeError: not strings (or strings in a RaggedTensor), naming what came.
      ValueError: strings of another shape than [B], [B, 1] or a scalar.
    """
    if isinstance(segment, tf.RaggedTensor):
        raise TypeError(_not_strings(layer_name, "a RaggedTensor"))
    if not (tf.is_tensor(segment) or keras.backend.is_keras_tensor(segment)):
        try:
            segment = tf.convert_to_tensor(segment)
        except (TypeError, ValueError):
            raise TypeError(_not_strings(layer_name, f"a {type(segment).__name__}")) from None
    dtype = keras.backend.standardize_dtype(segment.dtype)
    if dtype != "string":
        raise TypeError(_not_strings(layer_name, f"a tensor of dtype {dtype}"))
    shape = segment.shape  # a tuple for symbolic inputs
    if isinstance(shape, tf.TensorShape):
        shape = None if shape.rank is None else tuple(shape)
    if shape is None or len(_batch_shape(shape)) > 1:
        raise ValueError(_not_strings(layer_name, f"strings of shape {shape}"))
    return segment


def _as_batch(segment) -> tf.Tensor:
    """A checked segment as a string Tensor [B] (or a scalar): [B, 1] -> [B]."""
    segment = tf.convert_to_tensor(segment)
    if segment.shape.rank == 2:
        segment = tf.squeeze(segment, axis=1)
    return segment
