"""Token + learned position + segment embeddings, LayerNorm and dropout."""

import keras
from keras import ops

from bert_tf.layers import sequence_ids as sequence_ids_lib
from bert_tf.layers.bert_dropout import BertDropout
from bert_tf.layers.bert_layer_norm import BertLayerNorm


@keras.saving.register_keras_serializable(package="bert_tf")
class BertEmbeddings(keras.layers.Layer):
    """The embedding layer of BERT.

    Sums word, learned absolute position and segment (token type) embeddings,
    then applies LayerNorm and dropout. Takes `token_ids` and `segment_ids`
    of shape [B, S] and returns [B, S, D]. With `sequence_ids` (the
    encoder's `padding_mask`, see `bert_tf.layers.sequence_ids`) positions
    restart at 0 in every sequence of a packed row; without, they are
    0 .. S-1.

    Args:
      vocab_size: rows V of the word-embedding table.
      hidden_size: embedding width D.
      max_position_embeddings: rows of the position table (longest S).
      type_vocab_size: rows of the segment table.
      layer_norm_epsilon: LayerNorm's epsilon.
      dropout: dropout rate on the normalised sum.
      initializer_range: stddev of the truncated-normal initializers.
      **kwargs: `keras.layers.Layer` arguments (`name`, `dtype`, ...).
    """

    def __init__(self, vocab_size: int, hidden_size: int, max_position_embeddings: int = 512,
                 type_vocab_size: int = 2, layer_norm_epsilon: float = 1e-12,
                 dropout: float = 0.1, initializer_range: float = 0.02, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.layer_norm_epsilon = layer_norm_epsilon
        self.dropout = dropout
        self.initializer_range = initializer_range

    def build(self, token_ids_shape, segment_ids_shape=None, sequence_ids_shape=None):
        initializer = keras.initializers.TruncatedNormal(stddev=self.initializer_range)
        self.word_embeddings = keras.layers.Embedding(
            self.vocab_size, self.hidden_size, embeddings_initializer=initializer,
            dtype=self.dtype_policy, name="word_embeddings")
        self.word_embeddings.build(token_ids_shape)
        self.position_embeddings = keras.layers.Embedding(
            self.max_position_embeddings, self.hidden_size,
            embeddings_initializer=initializer, dtype=self.dtype_policy,
            name="position_embeddings")
        self.position_embeddings.build((None,))
        self.segment_embeddings = keras.layers.Embedding(
            self.type_vocab_size, self.hidden_size,
            embeddings_initializer=initializer, dtype=self.dtype_policy,
            name="segment_embeddings")
        self.segment_embeddings.build(token_ids_shape)
        self.layer_norm = BertLayerNorm(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name="layer_norm")
        self.layer_norm.build(tuple(token_ids_shape) + (self.hidden_size,))
        self.dropout_layer = BertDropout(
            self.dropout, dtype=self.dtype_policy, name="dropout")
        self.built = True

    def call(self, token_ids, segment_ids, sequence_ids=None, training=None):
        words = self.word_embeddings(token_ids)  # [B, S, D]
        # Segment embeddings as a one-hot matmul: for BERT's 2 (or a few)
        # rows, its gradient is a dense [T, D] product, where a gather's is
        # B * S sparse rows that the optimizer must segment-sum every step.
        one_hot_segments = ops.one_hot(
            segment_ids, self.type_vocab_size, dtype=self.compute_dtype)  # [B, S, T]
        segments = ops.matmul(one_hot_segments, ops.cast(
            self.segment_embeddings.embeddings, self.compute_dtype))  # [B, S, D]
        table = ops.cast(self.position_embeddings.embeddings, self.compute_dtype)  # [P, D]
        if sequence_ids is None:
            positions = table[None, :ops.shape(token_ids)[1]]  # [1, S, D]
        else:
            positions = ops.take(
                table, sequence_ids_lib.position_ids(sequence_ids), axis=0)  # [B, S, D]
        embeddings = words + segments + positions
        embeddings = self.layer_norm(embeddings)
        return self.dropout_layer(embeddings, training=training)

    def compute_output_shape(self, token_ids_shape, segment_ids_shape=None,
                             sequence_ids_shape=None):
        return tuple(token_ids_shape) + (self.hidden_size,)

    def get_config(self):
        config = super().get_config()
        config.update({
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "max_position_embeddings": self.max_position_embeddings,
            "type_vocab_size": self.type_vocab_size,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "dropout": self.dropout,
            "initializer_range": self.initializer_range,
        })
        return config
