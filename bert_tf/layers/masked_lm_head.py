"""Masked-LM head with the output projection tied to the word embeddings."""

import keras
import tensorflow as tf
from keras import ops

from bert_tf.layers.activations import get_activation
from bert_tf.layers.bert_layer_norm import BertLayerNorm


@keras.saving.register_keras_serializable(package="bert_tf")
class MaskedLMHead(keras.layers.Layer):
    """Predicts the original tokens at masked positions.

    Gathers the sequence output at `masked_positions` ([B, P]), transforms it
    (dense D -> D, activation, LayerNorm) and scores every vocabulary entry
    against the shared word-embedding matrix plus a per-token output bias.
    Returns float32 logits [B, P, V] so the loss is numerically stable under
    mixed precision.

    `word_embeddings` is the encoder's `keras.layers.Embedding`; it is not part
    of this layer's config and must be passed again when rebuilding.

    Args:
      word_embeddings: the encoder's word-embedding layer (tied output).
      hidden_act: activation of the transform, as the encoder's.
      layer_norm_epsilon: LayerNorm's epsilon.
      initializer_range: stddev of the transform's kernel initializer.
      **kwargs: `keras.layers.Layer` arguments (`name`, `dtype`, ...).
    """

    def __init__(self, word_embeddings: keras.layers.Embedding, hidden_act: str = "gelu",
                 layer_norm_epsilon: float = 1e-12, initializer_range: float = 0.02,
                 **kwargs):
        super().__init__(**kwargs)
        self.word_embeddings = word_embeddings
        self.hidden_act = hidden_act
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer_range = initializer_range

    def build(self, sequence_output_shape, masked_positions_shape=None):
        hidden_size = sequence_output_shape[-1]
        vocab_size = self.word_embeddings.input_dim
        self.transform = keras.layers.Dense(
            hidden_size, activation=get_activation(self.hidden_act),
            kernel_initializer=keras.initializers.TruncatedNormal(
                stddev=self.initializer_range),
            dtype=self.dtype_policy, name="transform")
        self.transform.build((None, None, hidden_size))
        self.layer_norm = BertLayerNorm(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name="layer_norm")
        self.layer_norm.build((None, None, hidden_size))
        # Added to the float32 logits; read without a bfloat16 round trip.
        self.output_bias = self.add_weight(
            shape=(vocab_size,), initializer="zeros", name="output_bias",
            autocast=False)
        self.built = True

    def call(self, sequence_output, masked_positions):
        batch, length = ops.shape(sequence_output)[0], ops.shape(sequence_output)[1]
        hidden_size = sequence_output.shape[-1]
        # A flat gather of B * P rows: ~8x faster (with its gradient) on CPU
        # than take_along_axis, which broadcasts the indices over D.
        offsets = ops.arange(batch, dtype="int32") * ops.cast(length, "int32")  # [B]
        positions = ops.cast(masked_positions, "int32") + offsets[:, None]  # [B, P]
        flat_sequence = ops.reshape(sequence_output, (-1, hidden_size))  # [B * S, D]
        gathered = ops.take(flat_sequence, ops.reshape(positions, (-1,)), axis=0)  # [B * P, D]
        hidden = self.layer_norm(self.transform(gathered))  # [B * P, D]
        embedding_matrix = ops.cast(self.word_embeddings.embeddings, hidden.dtype)  # [V, D]
        # One 2-D matmul against the table. A batched einsum
        # ("bpd,vd->bpv") broadcasts the [V, D] table over B, and its gradient
        # then materialises and sums a [B, V, D] tensor (1 GB for BERT-mini at
        # batch 32): that was a quarter of the whole train step. transpose_b
        # reads the table in place, where keras.ops' einsum would transpose
        # it (and its gradient) explicitly.
        logits = tf.linalg.matmul(hidden, embedding_matrix, transpose_b=True)  # [B * P, V]
        logits = ops.cast(logits, "float32") + ops.cast(self.output_bias, "float32")
        return ops.reshape(logits, (batch, -1, logits.shape[-1]))  # [B, P, V]

    def compute_output_shape(self, sequence_output_shape, masked_positions_shape=None):
        num_positions = masked_positions_shape[1] if masked_positions_shape else None
        return (sequence_output_shape[0], num_positions,
                self.word_embeddings.input_dim)

    def get_config(self):
        config = super().get_config()
        config.update({
            "hidden_act": self.hidden_act,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "initializer_range": self.initializer_range,
        })
        return config
