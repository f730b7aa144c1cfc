"""Typed configuration of a BERT encoder and its JSON round-trips.

Field names follow this project's layers; `from_bert_config` and
`to_bert_config` translate to the `bert_config.json` / Hugging Face
`config.json` vocabulary used by published checkpoints.
"""

import dataclasses

from bert_tf.layers.activations import SUPPORTED_ACTIVATIONS, canonical_activation


@dataclasses.dataclass(frozen=True)
class EncoderConfig:
    """Shape and regularisation of a BERT encoder (defaults: BERT-base).

    `hidden_act` defaults to the exact (erf) GELU, which Hugging Face BERT
    checkpoints use. Google's original TF1 checkpoints and Model Garden's
    `BertEncoderV2` use the tanh approximation ("gelu_tanh"); importers set
    the field from the checkpoint's own config. Every field is checked on
    construction (a `ValueError` names the field).

    Attributes:
      vocab_size: WordPiece vocabulary size.
      hidden_size: width of every layer (divisible by `num_heads`).
      num_layers: number of Transformer blocks.
      num_heads: attention heads per block.
      intermediate_size: width of each block's feed-forward layer.
      hidden_act: feed-forward activation, one of `SUPPORTED_ACTIVATIONS`.
      hidden_dropout: dropout on embeddings and block outputs, in [0, 1).
      attention_dropout: dropout on the attention probabilities, in [0, 1).
      max_position_embeddings: longest sequence the position table covers.
      type_vocab_size: number of segment types (2 in BERT).
      initializer_range: stddev of the truncated-normal initializers.
      layer_norm_epsilon: LayerNorm's epsilon.
    """

    vocab_size: int = 30522
    hidden_size: int = 768
    num_layers: int = 12
    num_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout: float = 0.1
    attention_dropout: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_epsilon: float = 1e-12

    def __post_init__(self):
        for name in ("vocab_size", "hidden_size", "num_layers", "num_heads",
                     "intermediate_size", "max_position_embeddings",
                     "type_vocab_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(
                    f"EncoderConfig.{name} must be a positive integer, got {value!r}")
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"EncoderConfig.hidden_size ({self.hidden_size}) must be divisible "
                f"by num_heads ({self.num_heads})")
        if self.hidden_act not in SUPPORTED_ACTIVATIONS:
            raise ValueError(
                f"EncoderConfig.hidden_act={self.hidden_act!r} is not supported; "
                f"expected one of {SUPPORTED_ACTIVATIONS}")
        for name in ("hidden_dropout", "attention_dropout"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ValueError(f"EncoderConfig.{name} must be in [0, 1), got {value!r}")

    @property
    def head_size(self) -> int:
        """Width of one attention head."""
        return self.hidden_size // self.num_heads

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict, source: str = "config") -> "EncoderConfig":
        """Builds a config from a dict, strictly: unknown keys and wrong types
        raise `bert_tf.config.ConfigError` naming the key."""
        from bert_tf import config

        return config.from_dict(cls, values, source)

    def replace(self, **changes) -> "EncoderConfig":
        """A copy with the given fields changed (and checked again)."""
        return dataclasses.replace(self, **changes)

    # --- bert_config.json / Hugging Face config.json vocabulary -------------

    @classmethod
    def from_bert_config(cls, values: dict, source: str = "bert_config.json") -> "EncoderConfig":
        """Reads Google's `bert_config.json` or a Hugging Face BERT `config.json`."""
        required = ("vocab_size", "hidden_size", "num_hidden_layers",
                    "num_attention_heads", "intermediate_size")
        missing = [key for key in required if key not in values]
        if missing:
            raise ValueError(f"{source}: missing BERT config key(s) {missing}")
        model_type = values.get("model_type", "bert")
        if model_type != "bert":
            raise ValueError(
                f"{source}: model_type {model_type!r} is not a BERT model")
        return cls(
            vocab_size=int(values["vocab_size"]),
            hidden_size=int(values["hidden_size"]),
            num_layers=int(values["num_hidden_layers"]),
            num_heads=int(values["num_attention_heads"]),
            intermediate_size=int(values["intermediate_size"]),
            hidden_act=canonical_activation(values.get("hidden_act", "gelu")),
            hidden_dropout=float(values.get("hidden_dropout_prob", 0.1)),
            attention_dropout=float(values.get("attention_probs_dropout_prob", 0.1)),
            max_position_embeddings=int(values.get("max_position_embeddings", 512)),
            type_vocab_size=int(values.get("type_vocab_size", 2)),
            initializer_range=float(values.get("initializer_range", 0.02)),
            layer_norm_epsilon=float(values.get("layer_norm_eps", 1e-12)),
        )

    def to_bert_config(self) -> dict:
        """The `bert_config.json` form (also valid as a HF BERT config)."""
        return {
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "num_hidden_layers": self.num_layers,
            "num_attention_heads": self.num_heads,
            "intermediate_size": self.intermediate_size,
            "hidden_act": self.hidden_act,
            "hidden_dropout_prob": self.hidden_dropout,
            "attention_probs_dropout_prob": self.attention_dropout,
            "max_position_embeddings": self.max_position_embeddings,
            "type_vocab_size": self.type_vocab_size,
            "initializer_range": self.initializer_range,
            "layer_norm_eps": self.layer_norm_epsilon,
        }

