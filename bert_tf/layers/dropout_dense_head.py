"""Dropout then a dense layer: the shared core of the classification-style heads."""

import keras
from keras import ops

from bert_tf.layers.bert_dropout import BertDropout


@keras.saving.register_keras_serializable(package="bert_tf")
class DropoutDenseHead(keras.layers.Layer):
    """Dropout on the features, then a dense layer; float32 logits.

    Input [..., D]; output [..., units]. The sublayers are named `dropout`
    and `dense`, so the weights sit at `<head name>/dense/kernel` and
    `<head name>/dense/bias`: `ClassificationHead`,
    `TokenClassificationHead` and `MultipleChoiceHead` subclass this layer
    (rather than hold one) to keep those checkpoint paths.

    Args:
      units: output width.
      dropout: dropout rate on the input features.
      initializer_range: stddev of the dense kernel's initializer.
      **kwargs: `keras.layers.Layer` arguments (`name`, `dtype`, ...).
    """

    def __init__(self, units: int, dropout: float = 0.1, initializer_range: float = 0.02,
                 **kwargs):
        super().__init__(**kwargs)
        if units < 1:
            raise ValueError(f"units must be >= 1, got {units}")
        self.units = units
        self.dropout = dropout
        self.initializer_range = initializer_range

    def build(self, features_shape):
        self.dropout_layer = BertDropout(
            self.dropout, dtype=self.dtype_policy, name="dropout")
        self.dense = keras.layers.Dense(
            self.units, kernel_initializer=keras.initializers.TruncatedNormal(
                stddev=self.initializer_range),
            dtype=self.dtype_policy, name="dense")
        self.dense.build(features_shape)
        self.built = True

    def call(self, features, training=None):
        hidden = self.dropout_layer(features, training=training)
        return ops.cast(self.dense(hidden), "float32")

    def compute_output_shape(self, features_shape):
        return (*features_shape[:-1], self.units)

    def get_config(self):
        config = super().get_config()
        config.update({
            "units": self.units,
            "dropout": self.dropout,
            "initializer_range": self.initializer_range,
        })
        return config
