"""Dropout with a cheaper random mask, for BERT's many large dropout sites."""

import keras

from bert_tf.layers import fast_ops


@keras.saving.register_keras_serializable(package="bert_tf")
class BertDropout(keras.layers.Dropout):
    """`keras.layers.Dropout` that draws 16 random bits per element.

    Same arguments, variables and semantics as Keras' layer: active only
    with `training=True`, inverted scaling, randomness from the layer's own
    `SeedGenerator` (its state is a variable, so checkpoints capture it and a
    restored run draws the same masks, though not the masks Keras' layer
    would draw). Keras draws a Philox float uniform per element; on CPU that
    was the largest non-matmul cost of a BERT train step (13 dropout sites in
    a 4-layer model, the attention-probability ones [B, N, S, T]).
    `fast_ops.dropout` compares 16 bits per element from a SplitMix64 stream
    keyed by the same seed, so the rate is exact to 2**-17. `noise_shape`
    falls back to Keras' implementation.
    """

    def call(self, inputs, training=False):
        if not training or self.rate <= 0:
            return inputs
        if self.noise_shape is not None or self.rate >= 1:
            return super().call(inputs, training=training)
        return fast_ops.dropout(inputs, self.rate, self.seed_generator.next())
