"""Token tagger (NER)."""

import keras

from bert_tf.layers.token_classification_head import TokenClassificationHead
from bert_tf.models.bert_encoder import BertEncoder
from bert_tf.models.task_model import TaskModel, encoder_inputs


@keras.saving.register_keras_serializable(package="bert_tf")
class BertTokenClassifier(TaskModel):
    """Encoder + token-classification head: `logits` [B, S, num_labels] (float32).

    Args:
      encoder: the `BertEncoder` whose sequence output is tagged.
      num_labels: number of tags K.
      dropout: dropout before the head; None: the encoder's hidden dropout.
      **kwargs: `keras.Model` arguments (`name`, `trainable`).

    Examples:
        Scores of 9 tags (CoNLL-2003's BIO tags) for every position:

        >>> import numpy as np
        >>> from bert_tf.models import BertEncoder, BertTokenClassifier
        >>> encoder = BertEncoder(vocab_size=100, hidden_size=16, num_layers=2,
        ...                       num_heads=2, intermediate_size=32)
        >>> tagger = BertTokenClassifier(encoder, num_labels=9)
        >>> inputs = {"token_ids": np.array([[2, 7, 9, 3, 0]], "int32"),  # [CLS] a b [SEP] pad
        ...           "segment_ids": np.zeros((1, 5), "int32"),
        ...           "padding_mask": np.array([[1, 1, 1, 1, 0]], "int32")}
        >>> tuple(tagger(inputs)["logits"].shape)
        (1, 5, 9)
    """

    def __init__(self, encoder: BertEncoder, num_labels: int, dropout: float | None = None,
                 **kwargs):
        config = encoder.encoder_config
        dropout = config.hidden_dropout if dropout is None else dropout
        inputs = encoder_inputs()
        head = TokenClassificationHead(
            num_labels, dropout=dropout, initializer_range=config.initializer_range,
            dtype=encoder.dtype_policy, name="token_classification_head")
        logits = head(encoder(inputs)["sequence_output"])
        super().__init__(inputs=inputs, outputs={"logits": logits}, **kwargs)
        self.encoder = encoder
        self.num_labels = num_labels
        self.dropout = dropout
        self.head = head

    def get_config(self):
        return self._task_config(num_labels=self.num_labels, dropout=self.dropout)
