"""Token tagging head (NER): one label distribution per token."""

import keras

from bert_tf.layers.dropout_dense_head import DropoutDenseHead


@keras.saving.register_keras_serializable(package="bert_tf")
class TokenClassificationHead(DropoutDenseHead):
    """Dropout then a dense layer over the sequence output.

    Input [B, S, D]; float32 logits [B, S, L].

    Args:
      num_labels: output width L (tags).
      dropout: dropout rate on the sequence output.
      initializer_range: stddev of the dense kernel's initializer.
      **kwargs: `keras.layers.Layer` arguments (`name`, `dtype`, ...).
    """

    def __init__(self, num_labels: int, dropout: float = 0.1,
                 initializer_range: float = 0.02, **kwargs):
        if num_labels < 1:
            raise ValueError(f"num_labels must be >= 1, got {num_labels}")
        super().__init__(num_labels, dropout=dropout, initializer_range=initializer_range,
                         **kwargs)
        self.num_labels = num_labels

    def get_config(self):
        config = super().get_config()
        del config["units"]  # num_labels gives it
        config["num_labels"] = self.num_labels
        return config
