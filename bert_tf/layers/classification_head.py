"""Sentence / sentence-pair classification or regression head."""

import keras
from keras import ops

from bert_tf.layers.bert_dropout import BertDropout


@keras.saving.register_keras_serializable(package="bert_tf")
class ClassificationHead(keras.layers.Layer):
    """Dropout then a dense layer on the pooled output.

    Input [B, D]; float32 logits [B, L]. With `num_classes=1` the single
    output is a regression score (STS-B).

    Args:
      num_classes: output width L (1 for regression).
      dropout: dropout rate on the pooled output.
      initializer_range: stddev of the dense kernel's initializer.
      **kwargs: `keras.layers.Layer` arguments (`name`, `dtype`, ...).
    """

    def __init__(self, num_classes: int, dropout: float = 0.1,
                 initializer_range: float = 0.02, **kwargs):
        super().__init__(**kwargs)
        if num_classes < 1:
            raise ValueError(f"num_classes must be >= 1, got {num_classes}")
        self.num_classes = num_classes
        self.dropout = dropout
        self.initializer_range = initializer_range

    def build(self, pooled_shape):
        self.dropout_layer = BertDropout(
            self.dropout, dtype=self.dtype_policy, name="dropout")
        self.dense = keras.layers.Dense(
            self.num_classes, kernel_initializer=keras.initializers.TruncatedNormal(
                stddev=self.initializer_range),
            dtype=self.dtype_policy, name="dense")
        self.dense.build(pooled_shape)
        self.built = True

    def call(self, pooled_output, training=None):
        hidden = self.dropout_layer(pooled_output, training=training)
        return ops.cast(self.dense(hidden), "float32")

    def compute_output_shape(self, pooled_shape):
        return (*pooled_shape[:-1], self.num_classes)

    def get_config(self):
        config = super().get_config()
        config.update({
            "num_classes": self.num_classes,
            "dropout": self.dropout,
            "initializer_range": self.initializer_range,
        })
        return config
