"""Sentence / sentence-pair classifier or regressor (GLUE)."""

import keras

from bert_tf.layers.classification_head import ClassificationHead
from bert_tf.models.bert_encoder import BertEncoder
from bert_tf.models.task_model import TaskModel, encoder_inputs, pooled_at


@keras.saving.register_keras_serializable(package="bert_tf")
class BertClassifier(TaskModel):
    """Encoder + classification head on the pooled output.

    Output `logits` [B, num_classes] (float32); `num_classes=1` gives a
    regression score.

    Packed rows (`packed=True`: several examples per row, numbered in
    `padding_mask`; see `BertEncoder`) add the input `cls_positions`
    [B, K], each example's [CLS], and give `logits` [B, K, num_classes].
    The weights are the same either way, and `get_config` leaves `packed`
    out, so a saved or exported classifier takes ordinary rows.

    Args:
      encoder: the `BertEncoder` whose pooled output is classified.
      num_classes: number of classes (1: one regression score).
      dropout: dropout before the head; None: the encoder's hidden dropout.
      packed: take packed rows (see above).
      **kwargs: `keras.Model` arguments (`name`, `trainable`).

    Examples:
        >>> import numpy as np
        >>> from bert_tf.models import BertClassifier, BertEncoder
        >>> encoder = BertEncoder(vocab_size=100, hidden_size=16, num_layers=2,
        ...                       num_heads=2, intermediate_size=32)
        >>> classifier = BertClassifier(encoder, num_classes=3)
        >>> inputs = {"token_ids": np.array([[2, 7, 9, 3, 0]], "int32"),  # [CLS] a b [SEP] pad
        ...           "segment_ids": np.zeros((1, 5), "int32"),
        ...           "padding_mask": np.array([[1, 1, 1, 1, 0]], "int32")}
        >>> tuple(classifier(inputs)["logits"].shape)
        (1, 3)
    """

    def __init__(self, encoder: BertEncoder, num_classes: int, dropout: float | None = None,
                 packed: bool = False, **kwargs):
        config = encoder.encoder_config
        dropout = config.hidden_dropout if dropout is None else dropout
        inputs = encoder_inputs()
        encoded = encoder(inputs)
        if packed:
            inputs["cls_positions"] = keras.Input(shape=(None,), dtype="int32",
                                                  name="cls_positions")
            pooled = pooled_at(encoder, encoded, inputs["cls_positions"])  # [B, K, D]
        else:
            pooled = encoded["pooled_output"]  # [B, D]
        head = ClassificationHead(
            num_classes, dropout=dropout, initializer_range=config.initializer_range,
            dtype=encoder.dtype_policy, name="classification_head")
        super().__init__(inputs=inputs, outputs={"logits": head(pooled)}, **kwargs)
        self.encoder = encoder
        self.num_classes = num_classes
        self.dropout = dropout
        self.packed = packed
        self.head = head

    def get_config(self):
        return self._task_config(num_classes=self.num_classes, dropout=self.dropout)
