"""Reads CoNLL-2003 NER files and writes predictions for conlleval.

The original English files (`eng.train`, `eng.testa`, `eng.testb`) hold one
token per line in four space-separated columns, `word POS chunk NER`, with a
blank line after each sentence and a `-DOCSTART-` line (`-DOCSTART- -X- -X- O`
or `-DOCSTART- -X- O O`) opening each document. The NER tags are IOB1: a
chunk starts with `I-` and `B-` appears only where two chunks of the same
type touch. `bert_tf.tasks.conll_metrics` scores the chunks and converts the
tags to IOB2 for training.

`featurize` packs sentences into BERT inputs, one `[CLS] pieces [SEP]` row
per sentence, each word labelled on its first WordPiece. Shapes: N
sentences, S max_seq_length.
"""

import dataclasses
import os

import numpy as np
import tensorflow as tf

from bert_tf import storage

# "O" first so that it is label id 0; the others in a fixed, documented order.
CONLL_LABELS = (
    "O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC",
)
_KNOWN_LABELS = frozenset(CONLL_LABELS)
_COLUMNS = ("word", "POS", "chunk", "NER")
_DOCUMENT_START = "-DOCSTART-"


@dataclasses.dataclass(frozen=True)
class ConllSentence:
    """One sentence of a CoNLL-2003 file.

    Attributes:
      words: the tokens, as in the file.
      labels: one NER tag per token, as in the file (IOB1 in the original data).
      document: index (from 0) of the document the sentence belongs to, counted
        over documents that hold at least one sentence; every sentence of a
        file without `-DOCSTART-` lines is in document 0.
    """

    words: tuple[str, ...]
    labels: tuple[str, ...]
    document: int


def read_conll(path):
    """Reads a 4-column CoNLL-2003 file into a list of `ConllSentence`.

    `-DOCSTART-` lines are dropped (they only advance `document`); blank
    lines end sentences, and several blank lines in a row are one break.

    Raises:
      ValueError: naming `path:line` for a row that does not have 4 columns, an
        NER tag outside `CONLL_LABELS` or bytes that are not UTF-8, and naming
        `path` when the file holds no sentence.
    """
    sentences = []
    words, labels = [], []
    document = 0
    document_has_sentences = False

    def end_sentence():
        nonlocal words, labels, document_has_sentences
        if words:
            sentences.append(ConllSentence(tuple(words), tuple(labels), document))
            document_has_sentences = True
        words, labels = [], []

    with storage.open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            line = _decode(raw, path, number)
            fields = line.split()
            if not fields:
                end_sentence()
            elif fields[0] == _DOCUMENT_START:
                end_sentence()
                # Consecutive -DOCSTART- lines (or one at the top of the file)
                # must not create empty documents, so the index moves on only
                # once the current document holds a sentence.
                if document_has_sentences:
                    document += 1
                    document_has_sentences = False
            else:
                words.append(_word(fields, path, number))
                labels.append(_label(fields, path, number))
        end_sentence()
    if not sentences:
        raise ValueError(f"{path}: no sentences found; expected CoNLL-2003 rows "
                         f"'{' '.join(_COLUMNS)}' separated by blank lines")
    return sentences


def _decode(raw, path, number):
    """One line of the file as text, without its line break."""
    try:
        return raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}:{number}: not valid UTF-8 ({error.reason})") from None


def _word(fields, path, number):
    """The word of a token row, after checking the column count."""
    if len(fields) != len(_COLUMNS):
        raise ValueError(f"{path}:{number}: expected {len(_COLUMNS)} columns "
                         f"'{' '.join(_COLUMNS)}', found {len(fields)}: {' '.join(fields)!r}")
    return fields[0]


def _label(fields, path, number):
    """The NER tag (last column) of a token row, after checking it is known."""
    label = fields[-1]
    if label not in _KNOWN_LABELS:
        raise ValueError(f"{path}:{number}: unknown NER tag {label!r}; "
                         f"expected one of {', '.join(CONLL_LABELS)}")
    return label


@dataclasses.dataclass
class SentenceFeatures:
    """Packed sentences and where each word's first piece landed.

    Attributes:
      table: numpy columns, one row per sentence: `index` int64 [N],
        `token_ids`, `padding_mask`, `label_ids` int32 [N, S] and
        `label_weights` float32 [N, S] (1 on each kept word's first piece).
      word_positions: `word_positions[i][j]` is the position of word j's
        first piece in sentence i, -1 when the word has no piece or was cut
        by max_seq_length (such words are not scored in training).
    """

    table: dict
    word_positions: list


def featurize(sentences, tokenizer, max_seq_length, tags, label_names=CONLL_LABELS):
    """Packs `[CLS] pieces [SEP]` per sentence, labelling each word's first piece.

    A sentence longer than `max_seq_length` is cut at a word boundary: the
    words that no longer fit get no position (the last word that fits may
    lose trailing pieces). NER keeps one window per sentence; CoNLL-2003
    sentences almost always fit in 128 pieces.

    Args:
      sentences: `ConllSentence`s (only their words are read).
      tokenizer: a `bert_tf.text.tokenizer.BertTokenizer`.
      max_seq_length: the row length S, [CLS] and [SEP] included (>= 2).
      tags: one tag sequence per sentence, as long as it: the training
        labels (NER trains on IOB2 tags, see `bert_tf.tasks.conll_metrics`).
      label_names: the label of each id.

    Returns:
      `SentenceFeatures`.

    Raises:
      ValueError: `max_seq_length` < 2, or a sentence's tags do not match
        its words or hold a tag outside `label_names` (naming the sentence).
    """
    if max_seq_length < 2:
        raise ValueError(f"max_seq_length must be >= 2 ([CLS] and [SEP]), got {max_seq_length}")
    tags = list(tags)
    if len(tags) != len(sentences):
        raise ValueError(f"{len(sentences)} sentences but {len(tags)} tag sequences")
    # Each distinct word is tokenized once, in one batch.
    words = sorted({word for sentence in sentences for word in sentence.words})
    pieces = tokenizer.tokenize(tf.constant(words)).to_list() if words else []
    pieces_of = dict(zip(words, pieces))
    label_index = {label: i for i, label in enumerate(label_names)}
    count = len(sentences)
    token_ids = np.full((count, max_seq_length), tokenizer.pad_id, np.int32)
    label_ids = np.zeros((count, max_seq_length), np.int32)
    label_weights = np.zeros((count, max_seq_length), np.float32)
    padding_mask = np.zeros((count, max_seq_length), np.int32)
    word_positions = []
    budget = max_seq_length - 1  # the last slot is kept for [SEP]
    for i, (sentence, sentence_tags) in enumerate(zip(sentences, tags)):
        if len(sentence_tags) != len(sentence.words):
            raise ValueError(f"sentence {i}: {len(sentence.words)} words but "
                             f"{len(sentence_tags)} tags")
        ids, positions = [tokenizer.cls_id], []
        for word, tag in zip(sentence.words, sentence_tags):
            if tag not in label_index:
                raise ValueError(f"sentence {i}: tag {tag!r} is not one of {tuple(label_names)}")
            word_pieces = pieces_of[word]
            if not word_pieces or len(ids) + 1 > budget:
                positions.append(-1)
                continue
            positions.append(len(ids))
            label_ids[i, len(ids)] = label_index[tag]
            label_weights[i, len(ids)] = 1.0
            ids.extend(word_pieces[:budget - len(ids)])
        ids.append(tokenizer.sep_id)
        token_ids[i, :len(ids)] = ids
        padding_mask[i, :len(ids)] = 1
        word_positions.append(positions)
    table = {"index": np.arange(count, dtype=np.int64), "token_ids": token_ids,
             "padding_mask": padding_mask, "label_ids": label_ids,
             "label_weights": label_weights}
    return SentenceFeatures(table, word_positions)


def write_predictions(path, sentences, predicted_labels):
    """Writes `word gold predicted` rows, the input format of conlleval.pl.

    Each sentence's rows are followed by one blank line. The file is written
    to `path + ".tmp"` and then renamed, so a reader never sees half a file.

    Args:
      path: the output file.
      sentences: `ConllSentence`s giving the words and gold labels.
      predicted_labels: one sequence of labels per sentence, as long as it.

    Raises:
      ValueError: when the number of sentences or of labels in a sentence
        differs, or a label is empty or holds whitespace (it would break the
        column format); the message names the sentence and token index.
    """
    sentences = list(sentences)
    predicted_labels = list(predicted_labels)
    if len(sentences) != len(predicted_labels):
        raise ValueError(f"{len(sentences)} sentences but {len(predicted_labels)} "
                         "sequences of predicted labels")
    lines = []
    for index, (sentence, predicted) in enumerate(zip(sentences, predicted_labels)):
        predicted = list(predicted)
        if len(predicted) != len(sentence.words):
            raise ValueError(f"sentence {index}: {len(sentence.words)} words but "
                             f"{len(predicted)} predicted labels")
        for position, (word, gold, guess) in enumerate(
                zip(sentence.words, sentence.labels, predicted)):
            for name, value in (("word", word), ("gold label", gold), ("predicted label", guess)):
                if not isinstance(value, str) or not value or any(c.isspace() for c in value):
                    raise ValueError(f"sentence {index}, token {position}: {name} {value!r} "
                                     "must be a non-empty string without whitespace")
            lines.append(f"{word} {gold} {guess}\n")
        lines.append("\n")
    with storage.atomic_write(os.fspath(path), encoding="utf-8") as handle:
        handle.writelines(lines)
