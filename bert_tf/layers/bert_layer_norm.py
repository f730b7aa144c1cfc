"""LayerNorm with a fused float32 forward and closed-form backward."""

import keras

from bert_tf.layers import fast_ops


@keras.saving.register_keras_serializable(package="bert_tf")
class BertLayerNorm(keras.layers.LayerNormalization):
    """`keras.layers.LayerNormalization` over the last axis, computed faster.

    Same arguments and variables (`gamma`, `beta`, float32, never autocast),
    and the same float32 math under any mixed-precision policy. Keras builds
    the normalisation from moments and broadcasts and lets autodiff
    differentiate them; `fast_ops.layer_norm` keeps the normalised input and
    1 / stddev and applies the closed-form gradient, about half the ops.
    Other axes, `rms_scaling` or a missing `gamma` / `beta` fall back to
    Keras' implementation.
    """

    def call(self, inputs):
        last_axis_only = list(self.axis) in ([-1], [len(inputs.shape) - 1])
        if not last_axis_only or self.rms_scaling or self.gamma is None or self.beta is None:
            return super().call(inputs)
        outputs = fast_ops.layer_norm(
            inputs, self.gamma.value, self.beta.value, self.epsilon)
        return keras.ops.cast(outputs, self.compute_dtype)
