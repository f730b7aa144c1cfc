"""The feature-based approach (BERT paper, section 5.3): fixed encoder features per token.

No fine-tuning: text goes through a pretrained encoder once and the hidden
states of chosen layers become features for another model. The paper's best
NER features concatenate the last four hidden layers of each word's first
WordPiece. Features are keyed back to the original text: each row names its
line, the original whitespace-separated token (or the WordPiece) and its
character span in the line.

Shapes: B lines in a batch, S sequence length, D hidden size, L layers.
"""

import dataclasses
import re

import numpy as np
import tensorflow as tf

from bert_tf.text.segment_packer import SegmentPacker, truncated_lengths

COMBINATIONS = ("concat", "sum", "mean")
GRANULARITIES = ("word", "wordpiece")
# google-research/bert's separator for a sentence pair on one input line.
PAIR_SEPARATOR = " ||| "
_WORD = re.compile(r"\S+")


@dataclasses.dataclass
class TokenFeatures:
    """Rows of features: one per original token (or WordPiece) of every line."""

    line_index: np.ndarray  # int32 [N]
    segment: np.ndarray  # int32 [N]: 0 for the first text of a line, 1 for the second
    token: list  # [N] str: the original token (word) or the WordPiece
    start_char: np.ndarray  # int32 [N], into the text of its segment
    end_char: np.ndarray  # int32 [N], exclusive
    features: np.ndarray  # float32 [N, D * L] (concat) or [N, D]


def parse_layers(spec, num_layers):
    """Layer indices from "-1,-2,-3,-4" (negative counts from the last layer)."""
    try:
        layers = [int(part) for part in spec.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"--layers must be comma-separated integers, got {spec!r}") from None
    if not layers:
        raise ValueError("--layers is empty")
    for layer in layers:
        if not -num_layers <= layer < num_layers:
            raise ValueError(f"--layers: layer {layer} does not exist; the encoder has "
                             f"{num_layers} layers (0..{num_layers - 1} or -1..-{num_layers})")
    return layers


def _char_index(text):
    """`byte offset -> char offset` for the UTF-8 bytes of `text` (length bytes + 1)."""
    index = np.zeros(len(text.encode("utf-8")) + 1, np.int32)
    position = 0
    for char_number, char in enumerate(text):
        width = len(char.encode("utf-8"))
        index[position:position + width] = char_number
        position += width
    index[position] = len(text)
    return index


class FeatureExtractor:
    """Runs `encoder` over text lines and collects per-token features of chosen layers.

    Args:
      encoder: a `BertEncoder`.
      tokenizer: the `BertTokenizer` of the encoder's vocabulary.
      layers: encoder layer indices (negative from the end).
      combine: "concat", "sum" or "mean" over the chosen layers.
      granularity: "word" (each whitespace token's first WordPiece, as the
        paper's NER features) or "wordpiece" (every piece).
      max_seq_length: longer lines are truncated (their extra tokens get no row).
    """

    def __init__(self, encoder, tokenizer, layers=(-1, -2, -3, -4), combine="concat",
                 granularity="word", max_seq_length=128):
        if combine not in COMBINATIONS:
            raise ValueError(f"combine must be one of {COMBINATIONS}, got {combine!r}")
        if granularity not in GRANULARITIES:
            raise ValueError(f"granularity must be one of {GRANULARITIES}, got {granularity!r}")
        self.encoder = encoder
        self.tokenizer = tokenizer
        self.layers = list(layers)
        self.combine = combine
        self.granularity = granularity
        self.packer = SegmentPacker.from_tokenizer(tokenizer, max_seq_length)
        self.truncated_lines = 0

        @tf.function(reduce_retracing=True)
        def hidden_states(inputs):
            outputs = encoder(inputs, training=False)["encoder_outputs"]
            chosen = tf.stack([tf.cast(outputs[i], tf.float32) for i in self.layers],
                              axis=-2)  # [B, S, L, D]
            if combine == "sum":
                return tf.reduce_sum(chosen, axis=-2)
            if combine == "mean":
                return tf.reduce_mean(chosen, axis=-2)
            shape = tf.shape(chosen)
            # [B, S, L, D] -> [B, S, L * D]: layers side by side, in --layers order.
            return tf.reshape(chosen, [shape[0], shape[1], -1])

        self._hidden_states = hidden_states

    def extract(self, lines, batch_size=32):
        """`TokenFeatures` of every line (a line may hold "text_a ||| text_b")."""
        rows = {"line_index": [], "segment": [], "token": [], "start_char": [],
                "end_char": [], "features": []}
        texts = [line.split(PAIR_SEPARATOR, 1) for line in lines]
        # Single texts and pairs are packed differently; batch them apart.
        for arity in (1, 2):
            indices = [i for i, t in enumerate(texts) if len(t) == arity]
            for start in range(0, len(indices), batch_size):
                chunk = indices[start:start + batch_size]
                self._extract_batch([texts[i] for i in chunk], chunk, rows)
        order = np.argsort(np.array(rows["line_index"], np.int64), kind="stable")
        width = rows["features"][0].shape[-1] if rows["features"] else 0
        return TokenFeatures(
            line_index=np.array(rows["line_index"], np.int32)[order],
            segment=np.array(rows["segment"], np.int32)[order],
            token=[rows["token"][i] for i in order],
            start_char=np.array(rows["start_char"], np.int32)[order],
            end_char=np.array(rows["end_char"], np.int32)[order],
            features=(np.stack(rows["features"]).astype(np.float32)[order]
                      if rows["features"] else np.zeros((0, width), np.float32)))

    def _extract_batch(self, texts, line_indices, rows):
        arity = len(texts[0])
        pieces = [self.tokenizer.tokenize_with_offsets(tf.constant([t[k] for t in texts]))
                  for k in range(arity)]
        packed = self.packer([ids for ids, _, _ in pieces])
        states = self._hidden_states(packed).numpy()  # [B, S, D']
        lengths = [ids.row_lengths() for ids, _, _ in pieces]
        if arity == 1:
            kept = [tf.minimum(lengths[0], self.packer.max_seq_length - 2)]
        else:
            kept = truncated_lengths(lengths[0], lengths[1], self.packer.max_seq_length - 3)
        kept = [k.numpy() for k in kept]
        for row, line_index in enumerate(line_indices):
            position = 1  # after [CLS]
            for segment, (ids, starts, ends) in enumerate(pieces):
                count = int(kept[segment][row])
                text = texts[row][segment]
                to_char = _char_index(text)
                self._add_rows(rows, line_index, segment, text, ids[row].numpy()[:count],
                               to_char[starts[row].numpy()[:count]],
                               to_char[ends[row].numpy()[:count]],
                               states[row, position:position + count])
                position += count + 1  # + [SEP]
            self.truncated_lines += any(int(kept[k][row]) < int(lengths[k][row])
                                        for k in range(arity))

    def _add_rows(self, rows, line_index, segment, text, ids, starts, ends, states):
        if self.granularity == "wordpiece":
            for i, piece_id in enumerate(ids):
                self._append(rows, line_index, segment, self.tokenizer.vocab[piece_id],
                             starts[i], ends[i], states[i])
            return
        # Each whitespace token's features are those of its first WordPiece.
        piece = 0
        for word in _WORD.finditer(text):
            while piece < len(ids) and starts[piece] < word.start():
                piece += 1
            if piece < len(ids) and starts[piece] < word.end():
                self._append(rows, line_index, segment, word.group(), word.start(),
                             word.end(), states[piece])

    @staticmethod
    def _append(rows, line_index, segment, token, start, end, vector):
        rows["line_index"].append(line_index)
        rows["segment"].append(segment)
        rows["token"].append(token)
        rows["start_char"].append(int(start))
        rows["end_char"].append(int(end))
        rows["features"].append(vector)
