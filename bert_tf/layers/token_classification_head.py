"""Token tagging head (NER): one label distribution per token."""

import keras
from keras import ops

from bert_tf.layers.bert_dropout import BertDropout


@keras.saving.register_keras_serializable(package="bert_tf")
class TokenClassificationHead(keras.layers.Layer):
    """Dropout then a dense layer over the sequence output.

    Input [B, S, D]; float32 logits [B, S, L].

    Args:
      num_labels: output width L (tags).
      dropout: dropout rate on the sequence output.
      initializer_range: stddev of the dense kernel's initializer.
      **kwargs: `keras.layers.Layer` arguments (`name`, `dtype`, ...).
    """

    def __init__(self, num_labels: int, dropout: float = 0.1,
                 initializer_range: float = 0.02, **kwargs):
        super().__init__(**kwargs)
        if num_labels < 1:
            raise ValueError(f"num_labels must be >= 1, got {num_labels}")
        self.num_labels = num_labels
        self.dropout = dropout
        self.initializer_range = initializer_range

    def build(self, sequence_shape):
        self.dropout_layer = BertDropout(
            self.dropout, dtype=self.dtype_policy, name="dropout")
        self.dense = keras.layers.Dense(
            self.num_labels, kernel_initializer=keras.initializers.TruncatedNormal(
                stddev=self.initializer_range),
            dtype=self.dtype_policy, name="dense")
        self.dense.build(sequence_shape)
        self.built = True

    def call(self, sequence_output, training=None):
        hidden = self.dropout_layer(sequence_output, training=training)
        return ops.cast(self.dense(hidden), "float32")

    def compute_output_shape(self, sequence_shape):
        return tuple(sequence_shape[:2]) + (self.num_labels,)

    def get_config(self):
        config = super().get_config()
        config.update({
            "num_labels": self.num_labels,
            "dropout": self.dropout,
            "initializer_range": self.initializer_range,
        })
        return config
