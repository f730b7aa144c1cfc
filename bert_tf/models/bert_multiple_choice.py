"""Multiple-choice model (SWAG)."""

import keras
from keras import ops

from bert_tf.layers.multiple_choice_head import MultipleChoiceHead
from bert_tf.models.bert_encoder import BertEncoder
from bert_tf.models.task_model import TaskModel, encoder_inputs


@keras.saving.register_keras_serializable(package="bert_tf")
class _FlattenChoices(keras.layers.Layer):
    """[B, C, S] -> [B * C, S]; a layer so the length is read at run time."""

    def call(self, inputs):
        return ops.reshape(inputs, (-1, ops.shape(inputs)[-1]))

    def compute_output_shape(self, inputs_shape):
        return (None, inputs_shape[-1])


@keras.saving.register_keras_serializable(package="bert_tf")
class BertMultipleChoice(TaskModel):
    """Scores C packed `[CLS] context [SEP] choice [SEP]` sequences per example.

    Inputs: the encoder's keys with shape [B, C, S]. Output `logits` [B, C]
    (float32); softmax over the last axis gives the choice probabilities.

    Args:
      encoder: the `BertEncoder` run on every choice's sequence.
      num_choices: choices C per example (4 in SWAG).
      dropout: dropout before the head; None: the encoder's hidden dropout.
      **kwargs: `keras.Model` arguments (`name`, `trainable`).

    Examples:
        One example with two choices, each a row of three tokens:

        >>> import numpy as np
        >>> from bert_tf.models import BertEncoder, BertMultipleChoice
        >>> encoder = BertEncoder(vocab_size=100, hidden_size=16, num_layers=2,
        ...                       num_heads=2, intermediate_size=32)
        >>> model = BertMultipleChoice(encoder, num_choices=2)
        >>> inputs = {"token_ids": np.array([[[2, 7, 3], [2, 8, 3]]], "int32"),  # [B, C, S]
        ...           "segment_ids": np.zeros((1, 2, 3), "int32"),
        ...           "padding_mask": np.ones((1, 2, 3), "int32")}
        >>> tuple(model(inputs)["logits"].shape)
        (1, 2)
    """

    def __init__(self, encoder: BertEncoder, num_choices: int = 4,
                 dropout: float | None = None, **kwargs):
        config = encoder.encoder_config
        dropout = config.hidden_dropout if dropout is None else dropout
        inputs = encoder_inputs(sequence_shape=(num_choices, None))
        # [B, C, S] -> [B * C, S]: every choice is an independent sequence.
        flatten = _FlattenChoices(name="flatten_choices")
        flat = {key: flatten(value) for key, value in inputs.items()}
        head = MultipleChoiceHead(
            num_choices, dropout=dropout, initializer_range=config.initializer_range,
            dtype=encoder.dtype_policy, name="multiple_choice_head")
        logits = head(encoder(flat)["pooled_output"])  # [B, C]
        super().__init__(inputs=inputs, outputs={"logits": logits}, **kwargs)
        self.encoder = encoder
        self.num_choices = num_choices
        self.dropout = dropout
        self.head = head

    def get_config(self):
        return self._task_config(num_choices=self.num_choices, dropout=self.dropout)
