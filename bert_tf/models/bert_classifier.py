"""Sentence / sentence-pair classifier or regressor (GLUE)."""

import keras

from bert_tf.layers.classification_head import ClassificationHead
from bert_tf.models.bert_encoder import BertEncoder
from bert_tf.models.task_model import TaskModel, encoder_inputs


@keras.saving.register_keras_serializable(package="bert_tf")
class BertClassifier(TaskModel):
    """Encoder + classification head on the pooled output.

    Output `logits` [B, num_classes] (float32); `num_classes=1` gives a
    regression score.

    Args:
      encoder: the `BertEncoder` whose pooled output is classified.
      num_classes: number of classes (1: one regression score).
      dropout: dropout before the head; None: the encoder's hidden dropout.
      **kwargs: `keras.Model` arguments (`name`, `trainable`).
    """

    def __init__(self, encoder: BertEncoder, num_classes: int, dropout: float | None = None,
                 **kwargs):
        config = encoder.encoder_config
        dropout = config.hidden_dropout if dropout is None else dropout
        inputs = encoder_inputs()
        head = ClassificationHead(
            num_classes, dropout=dropout, initializer_range=config.initializer_range,
            dtype=encoder.dtype_policy, name="classification_head")
        logits = head(encoder(inputs)["pooled_output"])
        super().__init__(inputs=inputs, outputs={"logits": logits}, **kwargs)
        self.encoder = encoder
        self.num_classes = num_classes
        self.dropout = dropout
        self.head = head

    def get_config(self):
        return self._task_config(num_classes=self.num_classes, dropout=self.dropout)
