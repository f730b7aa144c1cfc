"""KerasHub BERT presets (`keras_hub.models.BertBackbone`, written by `save_to_preset`).

A preset is a directory:

    config.json                        the backbone: class_name "BertBackbone" and its arguments
    model.weights.h5                   the backbone's weights (Keras' weights file)
    tokenizer.json                     the BertTokenizer (its `lowercase`)
    assets/tokenizer/vocabulary.txt    the WordPiece vocabulary
    metadata.json                      KerasHub and Keras versions
    task.json, task.weights.h5         a task model and its head's weights, when one
                                       was saved (`BertTextClassifier`)

`BertBackbone` is a post-LayerNorm BERT with the tanh GELU and LayerNorm
epsilon 1e-12, both fixed; one `dropout` rate covers every dropout. Its
attention kernels are einsum-shaped, as Model Garden's:
query/key/value [D, N, H] with bias [N, H], output [N, H, D].

Config, tokenizer and vocabulary are read with `json` alone; the weights
are read by KerasHub's own backbone (`keras_hub`, the `kerashub` extra).
Loading never deserialises a Keras object from the preset: the backbone is
built from the arguments read out of `config.json`.

KerasHub and Keras' weights files read and write local paths only: a preset
on object storage (`gs://...`) passes through a temporary local directory,
removed when the read or write ends.

Legend: D hidden size, N heads, H head size.
"""

from __future__ import annotations

import collections
import contextlib
import os
import tempfile
import warnings

import numpy as np

from bert_tf import storage
from bert_tf.checkpoints import weight_map
from bert_tf.checkpoints.json_file import read_json_object
from bert_tf.layers.activations import TANH_GELU_NAMES
from bert_tf.models.bert_classifier import BertClassifier
from bert_tf.models.encoder_config import EncoderConfig
from bert_tf.optional_imports import import_optional

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.weights.h5"
TOKENIZER_CONFIG_NAME = "tokenizer.json"
VOCAB_PATH = os.path.join("assets", "tokenizer", "vocabulary.txt")
BACKBONE_CLASS = "BertBackbone"
# BertBackbone's fixed settings (its constructor does not take them).
LAYER_NORM_EPSILON = 1e-12
HIDDEN_ACT = "gelu_tanh"

_PIP = "bert_tf[kerashub]"
# config.json argument -> EncoderConfig field.
_CONFIG_FIELDS = {
    "vocabulary_size": "vocab_size",
    "num_layers": "num_layers",
    "num_heads": "num_heads",
    "hidden_dim": "hidden_size",
    "intermediate_dim": "intermediate_size",
    "max_sequence_length": "max_position_embeddings",
    "num_segments": "type_vocab_size",
}


def _keras_hub(purpose):
    return import_optional("keras_hub", "keras-hub", purpose, _PIP)


def is_preset(path: str) -> bool:
    """Whether `path` is a directory whose `config.json` was written by KerasHub.

    Any KerasHub backbone counts: `read_config` then names the class when it
    is not a `BertBackbone`.

    Args:
      path: an existing file, directory or checkpoint prefix.
    """
    config_path = os.path.join(path, CONFIG_NAME)
    if not storage.isdir(path) or not storage.isfile(config_path):
        return False
    try:
        values = read_json_object(config_path)
    except ValueError:
        return False
    registered = values.get("registered_name")
    module = values.get("module")
    return ((isinstance(registered, str) and registered.startswith("keras_hub>"))
            or (isinstance(module, str) and module.startswith("keras_hub.")))


def _backbone_arguments(path):
    """The `BertBackbone` arguments in `path/config.json`, checked."""
    config_path = os.path.join(path, CONFIG_NAME)
    values = read_json_object(config_path, "a KerasHub preset ships config.json")
    class_name = values.get("class_name")
    if class_name != BACKBONE_CLASS:
        raise ValueError(f"{config_path}: class_name {class_name!r}; expected "
                         f"{BACKBONE_CLASS!r} (a KerasHub BERT preset)")
    arguments = values.get("config")
    if not isinstance(arguments, dict):
        raise ValueError(f"{config_path}: no 'config' object of {BACKBONE_CLASS} arguments")
    missing = [key for key in _CONFIG_FIELDS if key not in arguments]
    if missing:
        raise ValueError(f"{config_path}: {BACKBONE_CLASS} config lacks {', '.join(missing)}")
    return arguments


def read_config(path: str) -> EncoderConfig:
    """The `EncoderConfig` of the preset directory `path` (tanh GELU, epsilon 1e-12).

    Args:
      path: a KerasHub preset directory.

    Raises:
      FileNotFoundError: no `config.json`.
      ValueError: the config is not a `BertBackbone`'s, or a value is invalid.
    """
    arguments = _backbone_arguments(path)
    dropout = float(arguments.get("dropout", 0.1))
    fields = {ours: arguments[theirs] for theirs, ours in _CONFIG_FIELDS.items()}
    try:
        return EncoderConfig(**fields, hidden_act=HIDDEN_ACT, hidden_dropout=dropout,
                             attention_dropout=dropout, layer_norm_epsilon=LAYER_NORM_EPSILON)
    except ValueError as e:
        raise ValueError(f"{os.path.join(path, CONFIG_NAME)}: {e}") from e


def vocab_file(path: str) -> str:
    """The tokenizer's vocabulary in the preset directory `path`.

    Args:
      path: a KerasHub preset directory.

    Raises:
      FileNotFoundError: the preset ships no vocabulary.
    """
    vocab = os.path.join(path, VOCAB_PATH)
    if not storage.isfile(vocab):
        raise FileNotFoundError(f"{vocab} not found; a KerasHub BERT preset ships its "
                                "tokenizer's vocabulary there (BertTokenizer.save_to_preset)")
    return vocab


def read_lower_case(path: str) -> bool | None:
    """The tokenizer's `lowercase` from `tokenizer.json`, or None when absent.

    Args:
      path: a KerasHub preset directory.
    """
    tokenizer_path = os.path.join(path, TOKENIZER_CONFIG_NAME)
    if not storage.isfile(tokenizer_path):
        return None
    arguments = read_json_object(tokenizer_path).get("config")
    lower_case = arguments.get("lowercase") if isinstance(arguments, dict) else None
    return lower_case if isinstance(lower_case, bool) else None


def weights_file(path: str) -> str:
    """The weights file of the preset directory `path`.

    Args:
      path: a KerasHub preset directory.

    Raises:
      FileNotFoundError: no `model.weights.h5`.
    """
    weights = os.path.join(path, WEIGHTS_NAME)
    if not storage.isfile(weights):
        raise FileNotFoundError(f"{weights} not found; a KerasHub preset keeps its backbone's "
                                f"weights in {WEIGHTS_NAME} (sharded weights are not read)")
    return weights


def _backbone_variables(backbone):
    """{canonical name: KerasHub variable} of a `BertBackbone`.

    TransformerEncoder keeps its sublayers in private attributes: the `kerashub`
    extra pins keras-hub's minor version for them.
    """
    variables = {
        "bert/embeddings/word_embeddings": backbone.token_embedding.embeddings,
        "bert/embeddings/token_type_embeddings": backbone.segment_embedding.embeddings,
        "bert/embeddings/position_embeddings": backbone.position_embedding.position_embeddings,
        "bert/embeddings/LayerNorm/gamma": backbone.embeddings_layer_norm.gamma,
        "bert/embeddings/LayerNorm/beta": backbone.embeddings_layer_norm.beta,
        "bert/pooler/dense/kernel": backbone.pooled_dense.kernel,
        "bert/pooler/dense/bias": backbone.pooled_dense.bias,
    }
    for index, block in enumerate(backbone.transformer_layers):
        prefix = f"bert/encoder/layer_{index}"
        attention = block._self_attention_layer
        parts = {
            "attention/self/query": attention.query_dense,
            "attention/self/key": attention.key_dense,
            "attention/self/value": attention.value_dense,
            "attention/output/dense": attention.output_dense,
            "intermediate/dense": block._feedforward_intermediate_dense,
            "output/dense": block._feedforward_output_dense,
        }
        for part, dense in parts.items():
            variables[f"{prefix}/{part}/kernel"] = dense.kernel
            variables[f"{prefix}/{part}/bias"] = dense.bias
        for part, norm in (("attention/output/LayerNorm", block._self_attention_layer_norm),
                           ("output/LayerNorm", block._feedforward_layer_norm)):
            variables[f"{prefix}/{part}/gamma"] = norm.gamma
            variables[f"{prefix}/{part}/beta"] = norm.beta
    return variables


def _to_ours(name, value):
    """KerasHub's einsum layout -> ours ([D, D] kernels, [D] biases)."""
    if "/attention/self/" in name:
        if name.endswith("kernel"):
            return value.reshape(value.shape[0], -1)  # [D, N, H] -> [D, N * H]
        return value.reshape(-1)  # [N, H] -> [N * H]
    if name.endswith("/attention/output/dense/kernel"):
        return value.reshape(-1, value.shape[-1])  # [N, H, D] -> [N * H, D]
    return value


def _to_keras_hub(name, value, num_heads):
    """Our layout -> KerasHub's einsum layout."""
    if "/attention/self/" in name:
        if name.endswith("kernel"):
            return value.reshape(value.shape[0], num_heads, -1)  # [D, N, H]
        return value.reshape(num_heads, -1)  # [N, H]
    if name.endswith("/attention/output/dense/kernel"):
        return value.reshape(num_heads, -1, value.shape[-1])  # [N, H, D]
    return value


def _build_backbone(config, keras_hub):
    return keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size, num_layers=config.num_layers,
        num_heads=config.num_heads, hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size, dropout=config.hidden_dropout,
        max_sequence_length=config.max_position_embeddings,
        num_segments=config.type_vocab_size, dtype="float32")


# What h5py and Keras raise on a file that is not, or no longer, a Keras weights
# file: OSError when it is truncated or not HDF5, KeyError or RuntimeError when
# its structure is damaged, ValueError (Keras) when its arrays are not the backbone's.
_UNREADABLE = (OSError, KeyError, RuntimeError)


def _unreadable(weights, error, config_path):
    """The one-line error for the weights file `weights` that raised `error` when read."""
    lines = [line.strip().rstrip(":") for line in str(error).splitlines() if line.strip()]
    reason = lines[0] if lines else type(error).__name__
    return ValueError(f"{weights}: not a readable Keras weights file ({reason}); expected the "
                      f"HDF5 weights of the {BACKBONE_CLASS} of {config_path}, as "
                      "save_to_preset writes them")


def _stored_shapes(weights, local_weights, config_path):
    """Counter of the array shapes in the weights file (`local_weights`, a local copy of
    `weights`, the name errors give)."""
    import h5py  # a Keras dependency

    shapes = []
    try:
        with h5py.File(local_weights, "r") as f:
            f.visititems(lambda _, item: shapes.append(tuple(item.shape))
                         if isinstance(item, h5py.Dataset) else None)
    except _UNREADABLE as e:
        raise _unreadable(weights, e, config_path) from e
    return collections.Counter(shapes)


def _check_weights_fit(weights, local_weights, backbone, config_path):
    """Refuses a weights file whose arrays are not exactly the backbone's.

    Keras' loader leaves surplus arrays unread without a word (a 2-layer file
    loads into a 1-layer backbone) and reports other mismatches over many
    lines, so the shapes are compared here first.
    """
    expected = collections.Counter(tuple(v.shape) for v in backbone.weights)
    found = _stored_shapes(weights, local_weights, config_path)
    if expected == found:
        return
    absent = sorted((expected - found).elements())
    surplus = sorted((found - expected).elements())
    detail = "; ".join(part for part in (
        f"missing arrays of shape {', '.join(map(str, absent[:4]))}" if absent else "",
        f"unexpected arrays of shape {', '.join(map(str, surplus[:4]))}" if surplus else "")
        if part)
    raise ValueError(f"{weights}: does not fit the {BACKBONE_CLASS} of {config_path} "
                     f"({sum(found.values())} arrays, expected {sum(expected.values())}: "
                     f"{detail})")


def _load_weights(backbone, weights, local_weights, config_path):
    """`backbone.load_weights(local_weights)`, a failure as one line naming `weights`.

    Keras warns about each part it skips before it raises: those warnings are
    dropped when it raises (the error says why), and passed on when it loads.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            backbone.load_weights(local_weights)
        except (*_UNREADABLE, ValueError) as e:
            raise _unreadable(weights, e, config_path) from e
    for warning in caught:
        warnings.warn_explicit(warning.message, warning.category, warning.filename,
                               warning.lineno)


@contextlib.contextmanager
def _local_file(path):
    """`path` itself when local; else a temporary local copy of it, removed afterwards."""
    if not storage.has_scheme(path):
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="bert_tf_kerashub_") as staging:
        local = os.path.join(staging, os.path.basename(path))
        storage.copy(path, local)
        yield local


@contextlib.contextmanager
def _local_directory(directory):
    """`directory` itself when local; else a temporary local one, copied to `directory`
    (created) when the block ends without an error, then removed."""
    if not storage.has_scheme(directory):
        yield directory
        return
    with tempfile.TemporaryDirectory(prefix="bert_tf_kerashub_") as staging:
        yield staging
        storage.copy_tree(staging, directory)


def read_arrays(path: str, slots: list) -> dict:
    """{canonical name: array in our layout} for the slots found in the preset `path`.

    Args:
      path: a KerasHub preset directory.
      slots: the `weight_map.Slot`s to fill (heads have no KerasHub backbone weight).

    Raises:
      FileNotFoundError: no weights file.
      ValueError: the weights file is not a readable Keras weights file (truncated,
        overwritten), or its weights do not fit the backbone that `config.json` describes.
      MissingDependencyError: keras-hub is not installed.
    """
    weights = weights_file(path)
    keras_hub = _keras_hub(f"reading the KerasHub preset {path}")
    backbone = _build_backbone(read_config(path), keras_hub)
    config_path = os.path.join(path, CONFIG_NAME)
    with _local_file(weights) as local_weights:
        _check_weights_fit(weights, local_weights, backbone, config_path)
        _load_weights(backbone, weights, local_weights, config_path)
    variables = _backbone_variables(backbone)
    return {slot.name: _to_ours(slot.name, np.asarray(variables[slot.name].numpy()))
            for slot in slots if slot.name in variables}


def to_backbone(encoder):
    """A new `keras_hub.models.BertBackbone` holding a copy of `encoder`'s weights.

    Args:
      encoder: a `BertEncoder` with the tanh GELU and LayerNorm epsilon 1e-12,
        the two settings `BertBackbone` fixes.

    Raises:
      ValueError: the encoder's activation or epsilon differs from BertBackbone's.
      MissingDependencyError: keras-hub is not installed.
    """
    config = encoder.encoder_config
    if config.hidden_act not in TANH_GELU_NAMES:
        raise ValueError(f"KerasHub's {BACKBONE_CLASS} uses the tanh GELU; this encoder's "
                         f"hidden_act is {config.hidden_act!r}, so its outputs would differ")
    if config.layer_norm_epsilon != LAYER_NORM_EPSILON:
        raise ValueError(f"KerasHub's {BACKBONE_CLASS} fixes LayerNorm epsilon at "
                         f"{LAYER_NORM_EPSILON}; this encoder uses {config.layer_norm_epsilon}")
    backbone = _build_backbone(config, _keras_hub("the KerasHub export"))
    variables = _backbone_variables(backbone)
    for slot in weight_map.encoder_slots(encoder):
        value = _to_keras_hub(slot.name, np.asarray(slot.variable.numpy()), config.num_heads)
        variables[slot.name].assign(value)
    return backbone


def _text_classifier(classifier, backbone, preprocessor, keras_hub):
    """A `keras_hub.models.BertTextClassifier` holding `classifier`'s head.

    Both classify the pooled output after dropout with one dense layer
    (KerasHub's `output_dense`, ours `classification_head/dense`); no
    activation, so both give logits (a score when `num_classes` is 1).
    """
    task = keras_hub.models.BertTextClassifier(
        backbone, num_classes=classifier.num_classes, preprocessor=preprocessor,
        dropout=classifier.dropout)
    task.output_dense.kernel.assign(classifier.head.dense.kernel.numpy())
    task.output_dense.bias.assign(classifier.head.dense.bias.numpy())
    return task


def write_preset(model, directory: str, vocab_file: str | None,
                 lower_case: bool | None = None, sequence_length: int | None = None) -> str:
    """Writes `model` as a KerasHub preset that `BertBackbone.from_preset` loads.

    The preset also holds a `BertTokenizer` and a `BertTextClassifierPreprocessor`,
    so `BertTextClassifier.from_preset(directory, num_classes=...)` takes raw
    strings. Given a fine-tuned `BertClassifier`, its head is written too, as
    a `BertTextClassifier` task: `BertTextClassifier.from_preset(directory)`
    then predicts as the classifier does. Given a pretrainer, its encoder
    alone is written (`loading.save` refuses a pretrainer instead, rather than
    drop its MLM/NSP heads).

    Args:
      model: a `BertEncoder`, `BertPretrainer` or `BertClassifier`.
      directory: the output directory (created).
      vocab_file: the WordPiece vocabulary, with [PAD], [UNK], [CLS], [SEP] and [MASK];
        required, as the presets this module reads ship one.
      lower_case: the tokenizer's casing (guessed from the vocabulary when None).
        Lower-casing also strips accents, as BERT's uncased tokenizer does.
      sequence_length: the preprocessor's padded length, e.g. the length a
        classifier was fine-tuned with; None: `max_position_embeddings`.

    Raises:
      ValueError: no `vocab_file`, or the encoder does not fit `BertBackbone` (see
        `to_backbone`).
      MissingDependencyError: keras-hub is not installed.
    """
    from bert_tf.text import tokenizer_contract as contracts

    if not vocab_file:
        raise ValueError(f"{directory}: a KerasHub preset ships its tokenizer; give the "
                         "vocabulary (vocab_file, or --vocab_file)")
    keras_hub = _keras_hub("the KerasHub export")
    backbone = to_backbone(getattr(model, "encoder", model))
    if lower_case is None:
        lower_case = contracts.guess_lower_case(vocab_file)
    tokenizer = keras_hub.models.BertTokenizer(
        vocabulary=contracts.read_vocab(vocab_file), lowercase=bool(lower_case),
        strip_accents=bool(lower_case))
    # KerasHub's preprocessors pad to 512 by default: longer than a smaller
    # position table, so the classifier's preprocessor is written with ours.
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor(
        tokenizer, sequence_length=sequence_length or backbone.max_sequence_length)
    with _local_directory(directory) as local:
        if isinstance(model, BertClassifier):
            # Saves the backbone, the preprocessor with its tokenizer, and the task.
            _text_classifier(model, backbone, preprocessor, keras_hub).save_to_preset(local)
        else:
            backbone.save_to_preset(local)
            preprocessor.save_to_preset(local)  # with the tokenizer and its vocabulary
    return directory
