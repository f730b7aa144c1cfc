"""Common plumbing of task models: an encoder plus heads, serialisable."""

import keras
from keras import ops


class TaskModel(keras.Model):
    """Base of the task models: holds `encoder` and serialises it in its config.

    Subclasses build a functional graph in `__init__` from the encoder and
    their heads, call `super().__init__(inputs=..., outputs=...)`, and list
    their own constructor arguments in `get_config`.
    """

    def _task_config(self, **task_args):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "encoder": keras.saving.serialize_keras_object(self.encoder),
            **task_args,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        return cls(**config)


def encoder_inputs(sequence_shape=(None,)):
    """Fresh symbolic inputs with the encoder's keys, int32 [B, *sequence_shape]."""
    return {
        key: keras.Input(shape=sequence_shape, dtype="int32", name=key)
        for key in ("token_ids", "segment_ids", "padding_mask")
    }


def pooled_at(encoder, encoded, cls_positions):
    """The encoder's pooler applied at each sequence's [CLS] in packed rows.

    Args:
      encoder: the `BertEncoder` whose pooler is used (shared weights).
      encoded: its outputs for packed rows (`sequence_output` [B, S, D]).
      cls_positions: int32 [B, K], the first token of each of a row's K
        sequence slots.

    Returns:
      [B, K, D]: what `pooled_output` is for each sequence run alone.
    """
    first_tokens = ops.take_along_axis(
        encoded["sequence_output"], ops.expand_dims(cls_positions, -1), axis=1)  # [B, K, D]
    return encoder.pooler(first_tokens)
