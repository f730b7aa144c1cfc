"""Multiple-choice head (SWAG): one score per choice."""

import keras
from keras import ops

from bert_tf.layers.bert_dropout import BertDropout


@keras.saving.register_keras_serializable(package="bert_tf")
class MultipleChoiceHead(keras.layers.Layer):
    """Scores each (context, choice) sequence and groups the scores by example.

    Input: pooled outputs of the flattened choices [B * C, D]. Output: float32
    logits [B, C]; a softmax across the last axis gives the choice
    probabilities.

    Args:
      num_choices: choices C per example; B * C rows come in.
      dropout: dropout rate on the pooled outputs.
      initializer_range: stddev of the dense kernel's initializer.
      **kwargs: `keras.layers.Layer` arguments (`name`, `dtype`, ...).
    """

    def __init__(self, num_choices: int, dropout: float = 0.1,
                 initializer_range: float = 0.02, **kwargs):
        super().__init__(**kwargs)
        if num_choices < 2:
            raise ValueError(f"num_choices must be >= 2, got {num_choices}")
        self.num_choices = num_choices
        self.dropout = dropout
        self.initializer_range = initializer_range

    def build(self, pooled_shape):
        self.dropout_layer = BertDropout(
            self.dropout, dtype=self.dtype_policy, name="dropout")
        self.dense = keras.layers.Dense(
            1, kernel_initializer=keras.initializers.TruncatedNormal(
                stddev=self.initializer_range),
            dtype=self.dtype_policy, name="dense")
        self.dense.build(pooled_shape)
        self.built = True

    def call(self, pooled_output, training=None):
        hidden = self.dropout_layer(pooled_output, training=training)
        scores = ops.cast(self.dense(hidden), "float32")  # [B * C, 1]
        return ops.reshape(scores, (-1, self.num_choices))  # [B, C]

    def compute_output_shape(self, pooled_shape):
        return (None, self.num_choices)

    def get_config(self):
        config = super().get_config()
        config.update({
            "num_choices": self.num_choices,
            "dropout": self.dropout,
            "initializer_range": self.initializer_range,
        })
        return config
