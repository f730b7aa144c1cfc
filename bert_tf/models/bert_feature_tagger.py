"""Feature-based tagger (paper section 5.3): a frozen encoder, a BiLSTM, a per-token classifier."""

import keras

from bert_tf.layers.feature_mix import FeatureMix
from bert_tf.models.bert_encoder import BertEncoder
from bert_tf.models.task_model import TaskModel, encoder_inputs


class _InferenceMode(keras.layers.Layer):
    """Runs a layer in inference mode whatever mode the model runs in.

    A functional model hands its own `training` flag to every layer whose
    `call` takes one, overriding `training=False` given at construction;
    this layer's `call` takes none, so the flag stops here.
    """

    def __init__(self, layer, **kwargs):
        super().__init__(**kwargs)
        self.layer = layer

    def call(self, inputs):
        return self.layer(inputs, training=False)


@keras.saving.register_keras_serializable(package="bert_tf")
class BertFeatureTagger(TaskModel):
    """Frozen encoder features -> 2-layer BiLSTM -> `logits` [B, S, num_labels] (float32).

    The encoder's weights never train (its dropout is off too: it runs in
    inference mode); only the feature mix, the LSTMs and the classifier do.

    Args:
      encoder: the pretrained `BertEncoder` the features come from.
      num_labels: number of tags K.
      mix: which hidden states, combined how (`bert_tf.layers.feature_mix.MIXES`).
      lstm_units: units of each direction of each BiLSTM layer.
      dropout: dropout on the features and between the LSTM layers.
      **kwargs: `keras.Model` arguments (`name`, `trainable`).

    Examples:
        Tags from a weighted sum of every layer of a frozen encoder:

        >>> import numpy as np
        >>> from bert_tf.models import BertEncoder, BertFeatureTagger
        >>> encoder = BertEncoder(vocab_size=100, hidden_size=16, num_layers=2,
        ...                       num_heads=2, intermediate_size=32)
        >>> tagger = BertFeatureTagger(encoder, num_labels=9, mix="sum_all", lstm_units=8)
        >>> inputs = {"token_ids": np.array([[2, 7, 9, 3, 0]], "int32"),  # [CLS] a b [SEP] pad
        ...           "segment_ids": np.zeros((1, 5), "int32"),
        ...           "padding_mask": np.array([[1, 1, 1, 1, 0]], "int32")}
        >>> tuple(tagger(inputs)["logits"].shape)
        (1, 5, 9)
        >>> encoder.trainable  # the features stay as pretrained
        False
    """

    def __init__(self, encoder: BertEncoder, num_labels: int, mix: str = "concat_last_four",
                 lstm_units: int = 384, dropout: float = 0.1, **kwargs):
        encoder.trainable = False
        inputs = encoder_inputs()
        if not encoder.built:
            # Built here, at the top level, so its weights keep the encoder's own paths.
            encoder(inputs)
        encoded = _InferenceMode(encoder, name="frozen_encoder")(inputs)
        states = [encoded["embedding_output"], *encoded["encoder_outputs"]]
        feature_mix = FeatureMix(mix, name="feature_mix")
        hidden = keras.layers.Dropout(dropout)(feature_mix(states))
        # The LSTMs skip padding (and so never carry state across it).
        mask = keras.ops.greater(inputs["padding_mask"], 0)  # [B, S]
        for i in range(2):
            hidden = keras.layers.Bidirectional(
                # Named: checkpoints key the weights by path, so it must not depend
                # on how many LSTMs the process built before.
                keras.layers.LSTM(lstm_units, return_sequences=True, name=f"lstm_{i}"),
                name=f"bilstm_{i}")(hidden, mask=mask)
            hidden = keras.layers.Dropout(dropout)(hidden)
        logits = keras.layers.Dense(num_labels, dtype="float32", name="classifier")(hidden)
        super().__init__(inputs=inputs, outputs={"logits": logits}, **kwargs)
        self.encoder = encoder
        self.num_labels = num_labels
        self.mix = mix
        self.lstm_units = lstm_units
        self.dropout = dropout

    def get_config(self):
        return self._task_config(num_labels=self.num_labels, mix=self.mix,
                                 lstm_units=self.lstm_units, dropout=self.dropout)
