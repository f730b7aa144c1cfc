"""Multiple-choice head (SWAG): one score per choice."""

import keras
from keras import ops

from bert_tf.layers.dropout_dense_head import DropoutDenseHead


@keras.saving.register_keras_serializable(package="bert_tf")
class MultipleChoiceHead(DropoutDenseHead):
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
        if num_choices < 2:
            raise ValueError(f"num_choices must be >= 2, got {num_choices}")
        # One score per (context, choice) row.
        super().__init__(1, dropout=dropout, initializer_range=initializer_range, **kwargs)
        self.num_choices = num_choices

    def call(self, pooled_output, training=None):
        scores = super().call(pooled_output, training=training)  # [B * C, 1]
        return ops.reshape(scores, (-1, self.num_choices))  # [B, C]

    def compute_output_shape(self, pooled_shape):
        return (None, self.num_choices)

    def get_config(self):
        config = super().get_config()
        del config["units"]  # always 1
        config["num_choices"] = self.num_choices
        return config
