"""Span labeler for extractive question answering (SQuAD v1.1 / v2.0)."""

import keras

from bert_tf.layers.span_head import SpanHead
from bert_tf.models.bert_encoder import BertEncoder
from bert_tf.models.task_model import TaskModel, encoder_inputs


@keras.saving.register_keras_serializable(package="bert_tf")
class BertSpanLabeler(TaskModel):
    """Encoder + span head: `start_logits` and `end_logits` [B, S] (float32).

    For SQuAD v2.0 the no-answer score is read from position 0 ([CLS]), as in
    BERT.

    Args:
      encoder: the `BertEncoder` whose sequence output is scored.
      **kwargs: `keras.Model` arguments (`name`, `trainable`).

    Examples:
        A start and an end score for every position of the row:

        >>> import numpy as np
        >>> from bert_tf.models import BertEncoder, BertSpanLabeler
        >>> encoder = BertEncoder(vocab_size=100, hidden_size=16, num_layers=2,
        ...                       num_heads=2, intermediate_size=32)
        >>> labeler = BertSpanLabeler(encoder)
        >>> inputs = {"token_ids": np.array([[2, 7, 9, 3, 0]], "int32"),  # [CLS] a b [SEP] pad
        ...           "segment_ids": np.zeros((1, 5), "int32"),
        ...           "padding_mask": np.array([[1, 1, 1, 1, 0]], "int32")}
        >>> outputs = labeler(inputs)
        >>> tuple(outputs["start_logits"].shape), tuple(outputs["end_logits"].shape)
        ((1, 5), (1, 5))
    """

    def __init__(self, encoder: BertEncoder, **kwargs):
        config = encoder.encoder_config
        inputs = encoder_inputs()
        head = SpanHead(initializer_range=config.initializer_range,
                        dtype=encoder.dtype_policy, name="span_head")
        start_logits, end_logits = head(encoder(inputs)["sequence_output"])
        super().__init__(
            inputs=inputs,
            outputs={"start_logits": start_logits, "end_logits": end_logits}, **kwargs)
        self.encoder = encoder
        self.head = head

    def get_config(self):
        return self._task_config()
