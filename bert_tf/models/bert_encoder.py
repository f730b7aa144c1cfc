"""The BERT encoder (backbone) as a functional Keras 3 model."""

import keras

from bert_tf.layers import sequence_ids
from bert_tf.layers.bert_embeddings import BertEmbeddings
from bert_tf.layers.transformer_block import TransformerBlock
from bert_tf.models.encoder_config import EncoderConfig


@keras.saving.register_keras_serializable(package="bert_tf")
class BertEncoder(keras.Model):
    """BERT's Transformer encoder with its pooler; no task heads.

    Inputs (dict, int32, [B, S]): `token_ids`, `segment_ids`, `padding_mask`
    (1 for real tokens, 0 for padding). A packed row (several sequences in
    one row) numbers its sequences in `padding_mask` instead: 1, 2, ... per
    token, 0 for padding; attention then stays within each sequence and
    positions restart in each (see `bert_tf.layers.sequence_ids`), so every
    sequence is encoded as if it were alone in its row.

    Outputs (dict): `sequence_output` [B, S, D] (the last layer),
    `pooled_output` [B, D] (tanh dense layer on the first token) and
    `encoder_outputs`, a list of every layer's output [B, S, D], and
    `embedding_output` [B, S, D] (the input of the first layer), for the
    feature-based approach.

    The constructor arguments are the fields of `EncoderConfig` (checked
    there, before any layer is built); build from a config with
    `BertEncoder.from_encoder_config(config)`.

    Args:
      vocab_size: WordPiece vocabulary size V.
      hidden_size: width D of every layer.
      num_layers: number of Transformer blocks L.
      num_heads: attention heads N per block (D divisible by N).
      intermediate_size: width of each block's feed-forward layer.
      hidden_act: feed-forward activation: "gelu" (exact erf) or "gelu_tanh"
        (and the other names in `bert_tf.layers.activations`).
      hidden_dropout: dropout on embeddings and block outputs.
      attention_dropout: dropout on the attention probabilities.
      max_position_embeddings: longest sequence the position table covers.
      type_vocab_size: number of segment types (2 in BERT).
      initializer_range: stddev of the truncated-normal initializers.
      layer_norm_epsilon: LayerNorm's epsilon.
      dtype: Keras dtype policy (e.g. "mixed_bfloat16"); None: the global one.
      **kwargs: `keras.Model` arguments (`name`, `trainable`).

    Examples:
        A tiny encoder run on one row of four tokens and one padding position:

        >>> import numpy as np
        >>> from bert_tf.models import BertEncoder
        >>> encoder = BertEncoder(vocab_size=100, hidden_size=16, num_layers=2,
        ...                       num_heads=2, intermediate_size=32)
        >>> inputs = {"token_ids": np.array([[2, 7, 9, 3, 0]], "int32"),  # [CLS] a b [SEP] pad
        ...           "segment_ids": np.zeros((1, 5), "int32"),
        ...           "padding_mask": np.array([[1, 1, 1, 1, 0]], "int32")}
        >>> outputs = encoder(inputs)
        >>> tuple(outputs["sequence_output"].shape), tuple(outputs["pooled_output"].shape)
        ((1, 5, 16), (1, 16))
        >>> len(outputs["encoder_outputs"])  # every layer's [B, S, D]
        2

        A size preset (`bert_tf.models.presets`) gives the configuration:

        >>> from bert_tf.models import get_preset
        >>> tiny = BertEncoder.from_encoder_config(get_preset("bert_tiny"))
        >>> tiny.encoder_config.num_layers, tiny.encoder_config.hidden_size
        (2, 128)
    """

    def __init__(self, vocab_size: int = 30522, hidden_size: int = 768, num_layers: int = 12,
                 num_heads: int = 12, intermediate_size: int = 3072, hidden_act: str = "gelu",
                 hidden_dropout: float = 0.1, attention_dropout: float = 0.1,
                 max_position_embeddings: int = 512, type_vocab_size: int = 2,
                 initializer_range: float = 0.02, layer_norm_epsilon: float = 1e-12,
                 dtype: str | keras.DTypePolicy | None = None, **kwargs):
        # Validates every field before any layer is created.
        config = EncoderConfig(
            vocab_size=vocab_size, hidden_size=hidden_size, num_layers=num_layers,
            num_heads=num_heads, intermediate_size=intermediate_size,
            hidden_act=hidden_act, hidden_dropout=hidden_dropout,
            attention_dropout=attention_dropout,
            max_position_embeddings=max_position_embeddings,
            type_vocab_size=type_vocab_size, initializer_range=initializer_range,
            layer_norm_epsilon=layer_norm_epsilon)

        # === Layers ===
        embeddings = BertEmbeddings(
            vocab_size, hidden_size, max_position_embeddings, type_vocab_size,
            layer_norm_epsilon, hidden_dropout, initializer_range,
            dtype=dtype, name="embeddings")
        blocks = [
            TransformerBlock(
                num_heads, hidden_size, intermediate_size, hidden_act,
                hidden_dropout, attention_dropout, layer_norm_epsilon,
                initializer_range, dtype=dtype, name=f"transformer_layer_{i}")
            for i in range(num_layers)
        ]
        pooler = keras.layers.Dense(
            hidden_size, activation="tanh",
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
            dtype=dtype, name="pooler_dense")

        # === Functional graph ===
        token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
        segment_ids = keras.Input(shape=(None,), dtype="int32", name="segment_ids")
        padding_mask = keras.Input(shape=(None,), dtype="int32", name="padding_mask")

        hidden = embeddings(token_ids, segment_ids, padding_mask)
        embedding_output = hidden
        attention_bias = sequence_ids.attention_bias(padding_mask)  # [B, 1, S, T]
        encoder_outputs = []
        for block in blocks:
            hidden = block(hidden, attention_bias)
            encoder_outputs.append(hidden)
        pooled = pooler(hidden[:, 0, :])  # [B, D]

        super().__init__(
            inputs={"token_ids": token_ids, "segment_ids": segment_ids,
                    "padding_mask": padding_mask},
            outputs={"sequence_output": hidden, "pooled_output": pooled,
                     "encoder_outputs": encoder_outputs,
                     "embedding_output": embedding_output},
            dtype=dtype, **kwargs)

        # === Attributes ===
        # Functional models ignore `dtype`; record the layers' policy so task
        # heads and serialisation use the same one.
        self.dtype_policy = (keras.dtype_policies.get(dtype) if dtype is not None
                             else keras.config.dtype_policy())
        self.encoder_config = config
        self.embeddings = embeddings
        self.transformer_layers = blocks
        self.pooler = pooler

    @classmethod
    def from_encoder_config(cls, config: EncoderConfig, **kwargs) -> "BertEncoder":
        """Builds an encoder from an `EncoderConfig` (kwargs: `name`, `dtype`)."""
        return cls(**config.to_dict(), **kwargs)

    @property
    def word_embeddings(self):
        """The word-embedding layer, shared with the masked-LM head."""
        return self.embeddings.word_embeddings

    def get_config(self):
        return {"name": self.name, "trainable": self.trainable,
                "dtype": keras.dtype_policies.serialize(self.dtype_policy),
                **self.encoder_config.to_dict()}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        dtype = config.pop("dtype", None)
        if isinstance(dtype, dict):
            dtype = keras.dtype_policies.deserialize(dtype)
        return cls(dtype=dtype, **config)
