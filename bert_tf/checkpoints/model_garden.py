"""Model Garden (`official.nlp.modeling.networks.BertEncoderV2`) interop.

Model Garden checkpoints written with `tf.train.Checkpoint(encoder=...)` key
weights by tracking paths (`_transformer_layers/3/_attention_layer/_query_dense/kernel`);
in memory the same weights are named by Keras scopes
(`transformer/layer_3/self_attention/query/kernel`). Both tables are below.
Its attention kernels are einsum-shaped:
query/key/value [D, N, H] with bias [N, H], output [N, H, D].

Reading a Model Garden checkpoint needs only TensorFlow; building a Model
Garden encoder needs `tf-models-official` (the `garden` extra).
"""

import re

import tensorflow as tf

from bert_tf.checkpoints import readable, weight_map
from bert_tf.models.encoder_config import EncoderConfig
from bert_tf.optional_imports import import_optional

CHECKPOINT_ROOT = "encoder"
_VALUE_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"

_LAYER_PARTS = {
    "attention/self/query": "_attention_layer/_query_dense",
    "attention/self/key": "_attention_layer/_key_dense",
    "attention/self/value": "_attention_layer/_value_dense",
    "attention/output/dense": "_attention_layer/_output_dense",
    "attention/output/LayerNorm": "_attention_layer_norm",
    "intermediate/dense": "_intermediate_dense",
    "output/dense": "_output_dense",
    "output/LayerNorm": "_output_layer_norm",
}
_FIXED = {
    "bert/embeddings/word_embeddings": "_embedding_layer/embeddings",
    "bert/embeddings/token_type_embeddings": "_type_embedding_layer/embeddings",
    "bert/embeddings/position_embeddings": "_position_embedding_layer/embeddings",
    "bert/embeddings/LayerNorm/gamma": "_embedding_norm_layer/gamma",
    "bert/embeddings/LayerNorm/beta": "_embedding_norm_layer/beta",
    "bert/pooler/dense/kernel": "_pooler_layer/kernel",
    "bert/pooler/dense/bias": "_pooler_layer/bias",
}


_VARIABLE_LAYER_PARTS = {
    "attention/self/query": "self_attention/query",
    "attention/self/key": "self_attention/key",
    "attention/self/value": "self_attention/value",
    "attention/output/dense": "self_attention/attention_output",
    "attention/output/LayerNorm": "self_attention_layer_norm",
    "intermediate/dense": "intermediate",
    "output/dense": "output",
    "output/LayerNorm": "output_layer_norm",
}
_VARIABLE_FIXED = {
    "bert/embeddings/word_embeddings": "word_embeddings/embeddings",
    "bert/embeddings/token_type_embeddings": "type_embeddings/embeddings",
    "bert/embeddings/position_embeddings": "position_embedding/embeddings",
    "bert/embeddings/LayerNorm/gamma": "embeddings/layer_norm/gamma",
    "bert/embeddings/LayerNorm/beta": "embeddings/layer_norm/beta",
    "bert/pooler/dense/kernel": "pooler_transform/kernel",
    "bert/pooler/dense/bias": "pooler_transform/bias",
}


def _split_layer_name(canonical_name):
    match = re.fullmatch(r"bert/encoder/layer_(\d+)/(.+)/(kernel|bias|gamma|beta)",
                         canonical_name)
    if not match or match.group(2) not in _LAYER_PARTS:
        raise KeyError(f"no Model Garden equivalent for {canonical_name!r}")
    return match.groups()


def garden_variable_name(canonical_name):
    """In-memory Model Garden variable name, without the model scope and `:0`."""
    if canonical_name in _VARIABLE_FIXED:
        return _VARIABLE_FIXED[canonical_name]
    index, part, leaf = _split_layer_name(canonical_name)
    return f"transformer/layer_{index}/{_VARIABLE_LAYER_PARTS[part]}/{leaf}"


def garden_path(canonical_name):
    """Model Garden attribute path of a canonical encoder weight name."""
    if canonical_name in _FIXED:
        return _FIXED[canonical_name]
    index, part, leaf = _split_layer_name(canonical_name)
    return f"_transformer_layers/{index}/{_LAYER_PARTS[part]}/{leaf}"


def _to_garden(name, value, num_heads):
    """Our layout -> Model Garden's einsum layout for attention weights."""
    hidden = value.shape[-1] if value.ndim else None
    if "/attention/self/" in name:
        if name.endswith("kernel"):
            return value.reshape(value.shape[0], num_heads, -1)  # [D, N, H]
        return value.reshape(num_heads, -1)  # [N, H]
    if "/attention/output/dense/kernel" in name:
        return value.reshape(num_heads, -1, hidden)  # [N, H, D]
    return value


def _from_garden(name, value):
    """Model Garden's einsum layout -> ours ([D, D] kernels, [D] biases)."""
    if "/attention/self/" in name:
        if name.endswith("kernel"):
            return value.reshape(value.shape[0], -1)  # [D, N * H]
        return value.reshape(-1)  # [N * H]
    if "/attention/output/dense/kernel" in name:
        return value.reshape(-1, value.shape[-1])  # [N * H, D]
    return value


def _garden_variables(garden_encoder):
    """Model Garden variables keyed by name without model scope and `:0`."""
    return {v.name.split("/", 1)[1].rsplit(":", 1)[0]: v for v in garden_encoder.weights}


def build_garden_encoder(config):
    """A Model Garden `BertEncoderV2` with the same shape as `config`."""
    networks = import_optional("official.nlp.modeling.networks", "tf-models-official",
                               "Model Garden interop", "tf-models-official==2.20.0")
    tf_keras = import_optional("tf_keras", "tf-keras", "Model Garden interop")
    tanh = config.hidden_act != "gelu"
    if config.hidden_act == "relu":
        activation = "relu"
    else:
        activation = lambda x: tf_keras.activations.gelu(x, approximate=tanh)  # noqa: E731
    encoder = networks.BertEncoderV2(
        vocab_size=config.vocab_size, hidden_size=config.hidden_size,
        num_layers=config.num_layers, num_attention_heads=config.num_heads,
        max_sequence_length=config.max_position_embeddings,
        type_vocab_size=config.type_vocab_size, inner_dim=config.intermediate_size,
        inner_activation=activation, output_dropout=config.hidden_dropout,
        attention_dropout=config.attention_dropout,
        initializer=tf_keras.initializers.TruncatedNormal(stddev=config.initializer_range))
    if config.layer_norm_epsilon != 1e-12:
        raise ValueError(
            "Model Garden's BertEncoderV2 fixes LayerNorm epsilon at 1e-12; "
            f"this encoder uses {config.layer_norm_epsilon}")
    # BertEncoderV2 creates its weights on the first call.
    ones = tf.ones((1, 2), tf.int32)
    encoder(dict(input_word_ids=ones, input_mask=ones, input_type_ids=tf.zeros_like(ones)))
    return encoder


def to_garden_encoder(encoder):
    """A new Model Garden encoder holding a copy of our encoder's weights."""
    garden = build_garden_encoder(encoder.encoder_config)
    num_heads = encoder.encoder_config.num_heads
    variables = _garden_variables(garden)
    for slot in weight_map.encoder_slots(encoder):
        target = variables[garden_variable_name(slot.name)]
        target.assign(_to_garden(slot.name, slot.variable.numpy(), num_heads))
    return garden


def garden_arrays(garden_encoder, slots):
    """Arrays in our layout for every slot, read from a Model Garden encoder."""
    variables = _garden_variables(garden_encoder)
    return {slot.name: _from_garden(slot.name, variables[garden_variable_name(slot.name)].numpy())
            for slot in slots}


def is_garden_checkpoint(prefix):
    key = f"{CHECKPOINT_ROOT}/{_FIXED['bert/embeddings/word_embeddings']}{_VALUE_SUFFIX}"
    return key in readable.checkpoint_reader(prefix).get_variable_to_shape_map()


def read_checkpoint_arrays(prefix, slots):
    """Arrays in our layout for the slots present in a Model Garden checkpoint."""
    reader = readable.checkpoint_reader(prefix)
    available = reader.get_variable_to_shape_map()
    arrays = {}
    for slot in slots:
        key = f"{CHECKPOINT_ROOT}/{garden_path(slot.name)}{_VALUE_SUFFIX}"
        if key in available:
            arrays[slot.name] = _from_garden(slot.name, reader.get_tensor(key))
    return arrays


def infer_config(prefix, hidden_act="gelu_tanh"):
    """Encoder shape from the variable shapes of a Model Garden checkpoint.

    The activation is not recorded in the checkpoint: Model Garden's default
    is the tanh GELU, so that is assumed unless `hidden_act` says otherwise.
    """
    shapes = readable.checkpoint_reader(prefix).get_variable_to_shape_map()

    def shape(path):
        key = f"{CHECKPOINT_ROOT}/{path}{_VALUE_SUFFIX}"
        if key not in shapes:
            raise ValueError(f"{prefix}: Model Garden checkpoint lacks {key!r}")
        return shapes[key]

    vocab_size, hidden = shape(_FIXED["bert/embeddings/word_embeddings"])
    num_layers = 0
    while (f"{CHECKPOINT_ROOT}/_transformer_layers/{num_layers}/_output_dense/kernel"
           f"{_VALUE_SUFFIX}") in shapes:
        num_layers += 1
    _, num_heads, _ = shape("_transformer_layers/0/_attention_layer/_query_dense/kernel")
    _, intermediate = shape("_transformer_layers/0/_intermediate_dense/kernel")
    return EncoderConfig(
        vocab_size=vocab_size, hidden_size=hidden, num_layers=num_layers,
        num_heads=num_heads, intermediate_size=intermediate, hidden_act=hidden_act,
        max_position_embeddings=shape(_FIXED["bert/embeddings/position_embeddings"])[0],
        type_vocab_size=shape(_FIXED["bert/embeddings/token_type_embeddings"])[0])


# What a checkpoint's variable shapes fix; the other fields come from a config file.
_SHAPE_FIELDS = ("vocab_size", "hidden_size", "num_layers", "num_heads", "intermediate_size",
                 "max_position_embeddings", "type_vocab_size")


def with_recorded_settings(inferred: EncoderConfig, recorded: EncoderConfig,
                           source: str) -> EncoderConfig:
    """`inferred` (from the checkpoint's shapes) with the other fields of `recorded`.

    Args:
      inferred: the config `infer_config` read from the checkpoint.
      recorded: the config of the `bert_config.json` beside it.
      source: that file's path, for the error.

    Raises:
      ValueError: `recorded` gives the checkpoint other shapes (naming the field).
    """
    for field in _SHAPE_FIELDS:
        if getattr(recorded, field) != getattr(inferred, field):
            raise ValueError(f"{source}: {field} {getattr(recorded, field)}, but the Model "
                             f"Garden checkpoint beside it has {getattr(inferred, field)}")
    return recorded


def write_checkpoint(encoder, directory):
    """Writes our encoder as a Model Garden checkpoint (`encoder` root)."""
    garden = to_garden_encoder(encoder)
    return tf.train.Checkpoint(**{CHECKPOINT_ROOT: garden}).write(f"{directory}/bert_encoder")
