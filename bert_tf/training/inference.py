"""The model in inference mode as one traced function, for evaluation and prediction."""

import tensorflow as tf


def inference_fn(model):
    """`inputs -> outputs` of `model` with `training=False`, outputs cast to float32.

    Traced once per input signature (`reduce_retracing` keeps dynamically
    padded batches of different lengths on one trace).
    """

    @tf.function(reduce_retracing=True)
    def infer(inputs):
        outputs = model(inputs, training=False)
        return {key: tf.cast(value, tf.float32) for key, value in outputs.items()}

    return infer
