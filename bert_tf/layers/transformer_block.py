"""One post-LayerNorm Transformer encoder block, as in BERT."""

import keras
from keras import ops

from bert_tf.layers.activations import get_activation
from bert_tf.layers.bert_dropout import BertDropout
from bert_tf.layers.bert_layer_norm import BertLayerNorm
from bert_tf.layers.bert_self_attention import BertSelfAttention
from bert_tf.layers.inference_projections import dense_projection


@keras.saving.register_keras_serializable(package="bert_tf")
class TransformerBlock(keras.layers.Layer):
    """Self-attention and a feed-forward network, each followed by
    dropout, a residual connection and LayerNorm (post-LN).

    Input [B, S, D] and an additive attention bias; output [B, S, D].
    The feed-forward network runs on the flattened [B * S, D] rows, where a
    matmul and its bias add can fuse into one kernel.

    Args:
      num_heads: attention heads N.
      hidden_size: input and output width D.
      intermediate_size: width of the feed-forward layer.
      hidden_act: feed-forward activation (see `activations`).
      hidden_dropout: dropout rate on the attention and feed-forward outputs.
      attention_dropout: dropout rate on the attention probabilities.
      layer_norm_epsilon: LayerNorm's epsilon.
      initializer_range: stddev of the truncated-normal initializers.
      **kwargs: `keras.layers.Layer` arguments (`name`, `dtype`, ...).
    """

    def __init__(self, num_heads: int, hidden_size: int, intermediate_size: int,
                 hidden_act: str = "gelu", hidden_dropout: float = 0.1,
                 attention_dropout: float = 0.1, layer_norm_epsilon: float = 1e-12,
                 initializer_range: float = 0.02, **kwargs):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout = hidden_dropout
        self.attention_dropout = attention_dropout
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer_range = initializer_range
        # {"intermediate", "output": Int8Projection} while int8 inference
        # projections are on (see `bert_tf.layers.inference_projections`).
        self._int8 = None

    def build(self, inputs_shape, attention_bias_shape=None):
        initializer = keras.initializers.TruncatedNormal(stddev=self.initializer_range)
        intermediate_shape = tuple(inputs_shape[:-1]) + (self.intermediate_size,)
        self.self_attention = BertSelfAttention(
            self.num_heads, self.hidden_size, self.attention_dropout,
            self.initializer_range, dtype=self.dtype_policy, name="self_attention")
        self.self_attention.build(inputs_shape)
        self.attention_dropout_layer = BertDropout(
            self.hidden_dropout, dtype=self.dtype_policy, name="attention_dropout")
        self.attention_layer_norm = BertLayerNorm(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy,
            name="attention_layer_norm")
        self.attention_layer_norm.build(inputs_shape)
        self.intermediate = keras.layers.Dense(
            self.intermediate_size, activation=get_activation(self.hidden_act),
            kernel_initializer=initializer, dtype=self.dtype_policy, name="intermediate")
        self.intermediate.build(inputs_shape)
        self.output_dense = keras.layers.Dense(
            self.hidden_size, kernel_initializer=initializer,
            dtype=self.dtype_policy, name="output")
        self.output_dense.build(intermediate_shape)
        self.output_dropout = BertDropout(
            self.hidden_dropout, dtype=self.dtype_policy, name="output_dropout")
        self.output_layer_norm = BertLayerNorm(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy,
            name="output_layer_norm")
        self.output_layer_norm.build(inputs_shape)
        self.built = True

    def use_inference_projections(self, quantization=None,
                                  key_length: int | None = None) -> list:
        """Projections made once from the weights, for inference; returns them.

        Float: the attention's fused query|key|value kernel (the feed-forward
        layers need none). Int8: every projection of the block.

        Args:
          quantization: None or "int8".
          key_length: attention keys padded to this length (`BertSelfAttention`).
        """
        projections = self.self_attention.use_inference_projections(quantization, key_length)
        if quantization == "int8":
            self._int8 = {
                "intermediate": dense_projection(self.intermediate,
                                                 f"{self.name}_intermediate_int8"),
                "output": dense_projection(self.output_dense, f"{self.name}_output_int8")}
            projections += list(self._int8.values())
        return projections

    def use_training_projections(self):
        """Back to the layer's own variables."""
        self._int8 = None
        self.self_attention.use_training_projections()

    def _feed_forward(self, attended):
        """[B * S, D] -> [B * S, D], before dropout."""
        if self._int8 is None:
            return self.output_dense(self.intermediate(attended))
        hidden = self.intermediate.activation(self._int8["intermediate"](attended))
        return ops.cast(self._int8["output"](hidden), self.compute_dtype)

    def call(self, inputs, attention_bias=None, training=None):
        attended = self.self_attention(inputs, attention_bias, training=training)
        attended = self.attention_dropout_layer(attended, training=training)
        attended = self.attention_layer_norm(inputs + attended)  # [B, S, D]
        attended = ops.reshape(attended, (-1, self.hidden_size))  # [B * S, D]
        hidden = self._feed_forward(attended)  # [B * S, D] (through [B * S, I])
        hidden = self.output_dropout(hidden, training=training)
        outputs = self.output_layer_norm(attended + hidden)  # [B * S, D]
        return ops.reshape(outputs, ops.shape(inputs))  # [B, S, D]

    def compute_output_shape(self, inputs_shape, attention_bias_shape=None):
        return inputs_shape

    def get_config(self):
        config = super().get_config()
        config.update({
            "num_heads": self.num_heads,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "hidden_act": self.hidden_act,
            "hidden_dropout": self.hidden_dropout,
            "attention_dropout": self.attention_dropout,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "initializer_range": self.initializer_range,
        })
        return config
