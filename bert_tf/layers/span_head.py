"""Span-extraction head (SQuAD): start and end logits per token."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="bert_tf")
class SpanHead(keras.layers.Layer):
    """A dense layer of width 2 over the sequence output.

    Input [B, S, D]; returns float32 `(start_logits, end_logits)`, each [B, S].

    Args:
      initializer_range: stddev of the dense kernel's initializer.
      **kwargs: `keras.layers.Layer` arguments (`name`, `dtype`, ...).
    """

    def __init__(self, initializer_range: float = 0.02, **kwargs):
        super().__init__(**kwargs)
        self.initializer_range = initializer_range

    def build(self, sequence_shape):
        self.dense = keras.layers.Dense(
            2, kernel_initializer=keras.initializers.TruncatedNormal(
                stddev=self.initializer_range),
            dtype=self.dtype_policy, name="dense")
        self.dense.build(sequence_shape)
        self.built = True

    def call(self, sequence_output):
        logits = ops.cast(self.dense(sequence_output), "float32")  # [B, S, 2]
        return logits[..., 0], logits[..., 1]

    def compute_output_shape(self, sequence_shape):
        return (tuple(sequence_shape[:2]), tuple(sequence_shape[:2]))

    def get_config(self):
        config = super().get_config()
        config.update({"initializer_range": self.initializer_range})
        return config
