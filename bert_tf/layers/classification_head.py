"""Sentence / sentence-pair classification or regression head."""

import keras

from bert_tf.layers.dropout_dense_head import DropoutDenseHead


@keras.saving.register_keras_serializable(package="bert_tf")
class ClassificationHead(DropoutDenseHead):
    """Dropout then a dense layer on the pooled output.

    Input [B, D] (or [B, K, D] for packed rows); float32 logits [B, L] (or
    [B, K, L]). With `num_classes=1` the single output is a regression score
    (STS-B).

    Args:
      num_classes: output width L (1 for regression).
      dropout: dropout rate on the pooled output.
      initializer_range: stddev of the dense kernel's initializer.
      **kwargs: `keras.layers.Layer` arguments (`name`, `dtype`, ...).
    """

    def __init__(self, num_classes: int, dropout: float = 0.1,
                 initializer_range: float = 0.02, **kwargs):
        if num_classes < 1:
            raise ValueError(f"num_classes must be >= 1, got {num_classes}")
        super().__init__(num_classes, dropout=dropout, initializer_range=initializer_range,
                         **kwargs)
        self.num_classes = num_classes

    def get_config(self):
        config = super().get_config()
        del config["units"]  # num_classes gives it
        config["num_classes"] = self.num_classes
        return config
