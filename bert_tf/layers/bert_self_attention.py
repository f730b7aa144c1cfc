"""Multi-head self-attention as in BERT, with a float32 softmax."""

import math

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="bert_tf")
class BertSelfAttention(keras.layers.Layer):
    """Multi-head scaled dot-product self-attention.

    Separate query, key and value projections of [D, D] and an output
    projection of [D, D], each with a bias, so the kernels map one-to-one onto
    Google TF1 and Hugging Face checkpoints. Attention probabilities get
    dropout. The additive `attention_bias` ([B, 1, 1, T] or broadcastable to
    [B, N, S, T]) is added to the scores in float32, and the softmax is always
    computed in float32, whatever the mixed-precision policy.
    """

    def __init__(self, num_heads, hidden_size, attention_dropout=0.1,
                 initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        if hidden_size % num_heads:
            raise ValueError(
                f"hidden_size ({hidden_size}) must be divisible by num_heads ({num_heads})")
        self.num_heads = num_heads
        self.hidden_size = hidden_size
        self.attention_dropout = attention_dropout
        self.initializer_range = initializer_range
        self.head_size = hidden_size // num_heads

    def build(self, inputs_shape, attention_bias_shape=None):
        initializer = keras.initializers.TruncatedNormal(stddev=self.initializer_range)

        def projection(name):
            layer = keras.layers.Dense(
                self.hidden_size, kernel_initializer=initializer,
                dtype=self.dtype_policy, name=name)
            layer.build(inputs_shape)
            return layer

        self.query = projection("query")
        self.key = projection("key")
        self.value = projection("value")
        self.attention_output = projection("attention_output")
        self.probs_dropout = keras.layers.Dropout(
            self.attention_dropout, dtype=self.dtype_policy, name="probs_dropout")
        self.built = True

    def _split_heads(self, x):
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        return ops.reshape(x, (batch, length, self.num_heads, self.head_size))  # [B, S, N, H]

    def call(self, inputs, attention_bias=None, training=None):
        batch, length = ops.shape(inputs)[0], ops.shape(inputs)[1]
        query = self._split_heads(self.query(inputs))  # [B, S, N, H]
        key = self._split_heads(self.key(inputs))  # [B, T, N, H]
        value = self._split_heads(self.value(inputs))  # [B, T, N, H]
        scores = ops.einsum("bsnh,btnh->bnst", query, key)  # [B, N, S, T]
        scores = ops.cast(scores, "float32") / math.sqrt(self.head_size)
        if attention_bias is not None:
            scores = scores + ops.cast(attention_bias, "float32")
        probs = ops.softmax(scores, axis=-1)
        probs = ops.cast(probs, self.compute_dtype)
        probs = self.probs_dropout(probs, training=training)
        context = ops.einsum("bnst,btnh->bsnh", probs, value)  # [B, S, N, H]
        context = ops.reshape(context, (batch, length, self.hidden_size))  # [B, S, D]
        return self.attention_output(context)

    def compute_output_shape(self, inputs_shape, attention_bias_shape=None):
        return inputs_shape

    def get_config(self):
        config = super().get_config()
        config.update({
            "num_heads": self.num_heads,
            "hidden_size": self.hidden_size,
            "attention_dropout": self.attention_dropout,
            "initializer_range": self.initializer_range,
        })
        return config
