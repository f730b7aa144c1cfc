"""This project's own checkpoint format.

A directory holding:
  bert_tf_model.json   model type, encoder config, task arguments, bert_tf
                       version, the tokenizer contract and (under "task",
                       optional) the task info: see `validate_task_info`
  vocab.txt            the vocabulary (when known)
  weights.*  or ckpt-N.*   a TF object checkpoint whose `weights` dict maps
                       canonical names (see `weight_map`) to variables

The trainer writes its `ckpt-N` checkpoints into the same kind of directory,
with the same `weights` dict next to optimizer and input state, so a training
run's `model_dir` is itself loadable.
"""

import json
import os
import shutil

import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

import bert_tf
from bert_tf.checkpoints import assign, weight_map
from bert_tf.checkpoints.json_file import read_json_object

METADATA_NAME = "bert_tf_model.json"
VOCAB_NAME = "vocab.txt"
WEIGHTS_PREFIX = "weights"
WEIGHTS_KEY = "weights"
FORMAT_VERSION = 1

# What a model does, as recorded in the task info (and read by the exporter).
TASK_KINDS = ("classifier", "regressor", "span_labeler", "token_classifier",
              "multiple_choice", "pretrainer", "encoder")
# Task-info keys beyond name/kind/max_seq_length, by kind: (key, type).
_KIND_KEYS = {
    "classifier": (("label_names", list), ("text_inputs", int)),
    "regressor": (("text_inputs", int),),
    "span_labeler": (("version_2_with_negative", bool), ("max_answer_length", int),
                     ("max_query_length", int)),
    "token_classifier": (("label_names", list),),
    "multiple_choice": (("num_choices", int),),
    "pretrainer": (),
    "encoder": (),
}


def is_native(path):
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, METADATA_NAME))


def model_metadata(model, tokenizer_contract=None, task_info=None):
    """The metadata record of `model` (encoder or task model).

    `task_info` (optional dict, see `validate_task_info`) is stored under "task".
    """
    encoder = getattr(model, "encoder", model)
    task_args = {k: v for k, v in model.get_config().items()
                 if k not in ("name", "trainable", "encoder")
                 and k not in encoder.encoder_config.to_dict()}
    return {
        "format": "bert_tf",
        "format_version": FORMAT_VERSION,
        "bert_tf_version": bert_tf.__version__,
        "model_class": type(model).__name__,
        "task_args": task_args if model is not encoder else {},
        "encoder_config": encoder.encoder_config.to_dict(),
        "tokenizer": tokenizer_contract,
        **({"task": validate_task_info(task_info)} if task_info is not None else {}),
    }


def write_metadata(model, directory, tokenizer_contract=None, vocab_file=None, task_info=None):
    """Writes `bert_tf_model.json` (and copies the vocab) into `directory`.

    `task_info` (see `validate_task_info`) is stored under the key "task".
    """
    os.makedirs(directory, exist_ok=True)
    metadata = model_metadata(model, tokenizer_contract, task_info)
    path = os.path.join(directory, METADATA_NAME)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(metadata, f, indent=2, sort_keys=True)
    os.replace(path + ".tmp", path)
    if vocab_file and os.path.abspath(vocab_file) != os.path.abspath(
            os.path.join(directory, VOCAB_NAME)):
        shutil.copyfile(vocab_file, os.path.join(directory, VOCAB_NAME))
    return metadata


def weights_dict(model):
    """The `{canonical name: variable}` dict stored under the `weights` key."""
    return {slot.name: slot.variable for slot in weight_map.task_slots(model)}


def save(model, directory, tokenizer_contract=None, vocab_file=None, task_info=None):
    """Saves `model` in this project's format; returns the weights prefix."""
    write_metadata(model, directory, tokenizer_contract, vocab_file, task_info)
    checkpoint = tf.train.Checkpoint(**{WEIGHTS_KEY: weights_dict(model)})
    return checkpoint.write(os.path.join(directory, WEIGHTS_PREFIX))


def read_metadata(directory):
    path = os.path.join(directory, METADATA_NAME)
    metadata = read_json_object(path)
    if metadata.get("format") != "bert_tf":
        raise ValueError(f"{path}: not a bert_tf model record (format={metadata.get('format')!r})")
    if metadata.get("format_version", 0) > FORMAT_VERSION:
        raise ValueError(
            f"{path}: format_version {metadata['format_version']} is newer than this "
            f"bert_tf ({bert_tf.__version__}) supports ({FORMAT_VERSION})")
    return metadata


def weights_prefix(directory):
    """The newest training checkpoint in `directory`, else its saved weights."""
    latest = tf.train.latest_checkpoint(directory)
    if latest:
        return latest
    prefix = os.path.join(directory, WEIGHTS_PREFIX)
    if os.path.exists(prefix + ".index"):
        return prefix
    raise FileNotFoundError(f"{directory}: has {METADATA_NAME} but no weights checkpoint")


def _weights_checkpoint_keys(reader, prefix):
    """`{canonical name: tensor key}` of the `weights` dict, read from the object graph.

    The tensor key of a variable follows the *first* path to it in the
    object graph; in a training checkpoint the same variables are also
    reachable under `model_variables`, so the key is looked up rather than
    derived from the name.
    """
    graph = trackable_object_graph_pb2.TrackableObjectGraph.FromString(
        reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
    weights_nodes = [child.node_id for child in graph.nodes[0].children
                     if child.local_name == WEIGHTS_KEY]
    if not weights_nodes:
        raise ValueError(f"{prefix}: not a bert_tf checkpoint (no '{WEIGHTS_KEY}' object)")
    keys = {}
    for child in graph.nodes[weights_nodes[0]].children:
        for attribute in graph.nodes[child.node_id].attributes:
            if attribute.name == "VARIABLE_VALUE":
                keys[child.local_name] = attribute.checkpoint_key
    return keys


def read_arrays(prefix, slots):
    """Arrays for the slots present in a native checkpoint (our layout already)."""
    reader = tf.train.load_checkpoint(prefix)
    keys = _weights_checkpoint_keys(reader, prefix)
    return {slot.name: reader.get_tensor(keys[slot.name]) for slot in slots if slot.name in keys}


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def validate_task_info(task_info, source="task_info"):
    """Checks a task-info dict and returns it (a copy).

    Keys: "name" (str, e.g. "glue", "squad"), "kind" (one of `TASK_KINDS`),
    "max_seq_length" (int >= 2), and by kind: classifier "label_names"
    (list of str) and "text_inputs" (1 or 2); regressor "text_inputs";
    span_labeler "version_2_with_negative" (bool), "max_answer_length" and
    "max_query_length" (int >= 1); token_classifier "label_names";
    multiple_choice "num_choices" (int >= 1). Other keys are kept as they are.

    Raises:
      ValueError: naming `source`, the key and what was expected.
    """
    if not isinstance(task_info, dict):
        raise ValueError(f"{source}: expected a dict, got {type(task_info).__name__}")
    info = dict(task_info)
    if not isinstance(info.get("name"), str) or not info["name"]:
        raise ValueError(f"{source}: 'name' must be a non-empty string, got {info.get('name')!r}")
    if info.get("kind") not in TASK_KINDS:
        raise ValueError(
            f"{source}: 'kind' must be one of {TASK_KINDS}, got {info.get('kind')!r}")
    if not _is_int(info.get("max_seq_length")) or info["max_seq_length"] < 2:
        raise ValueError(
            f"{source}: 'max_seq_length' must be an integer >= 2, "
            f"got {info.get('max_seq_length')!r}")
    for key, kind in _KIND_KEYS[info["kind"]]:
        value = info.get(key)
        if key == "label_names":
            ok = (isinstance(value, list) and value
                  and all(isinstance(name, str) for name in value))
            expected = "a non-empty list of strings"
        elif kind is bool:
            ok, expected = isinstance(value, bool), "true or false"
        elif key == "text_inputs":
            ok, expected = value in (1, 2) and _is_int(value), "1 or 2"
        else:
            ok, expected = _is_int(value) and value >= 1, "an integer >= 1"
        if not ok:
            raise ValueError(
                f"{source}: '{key}' (for kind {info['kind']!r}) must be {expected}, "
                f"got {value!r}")
    return info


def kind_of_model(model_class, task_args):
    """The task kind a model class implies (older directories have no "task")."""
    if model_class == "BertClassifier":
        return "regressor" if task_args.get("num_classes") == 1 else "classifier"
    kinds = {"BertEncoder": "encoder", "BertPretrainer": "pretrainer",
             "BertSpanLabeler": "span_labeler", "BertTokenClassifier": "token_classifier",
             "BertMultipleChoice": "multiple_choice"}
    if model_class not in kinds:
        raise ValueError(
            f"unknown model_class {model_class!r}; expected BertClassifier or one of "
            f"{sorted(kinds)}")
    return kinds[model_class]


def build_model(metadata, source=METADATA_NAME, dtype=None):
    """A freshly initialised model of the class and shape `metadata` records."""
    from bert_tf import models
    from bert_tf.models.encoder_config import EncoderConfig

    model_class = metadata.get("model_class")
    kind_of_model(model_class, metadata.get("task_args") or {})  # validates the class
    config = EncoderConfig.from_dict(metadata.get("encoder_config") or {}, source=source)
    encoder = models.BertEncoder.from_encoder_config(config, dtype=dtype)
    if model_class == "BertEncoder":
        return encoder
    task_args = metadata.get("task_args") or {}
    if not isinstance(task_args, dict):
        raise ValueError(f"{source}: 'task_args' must be an object, got {task_args!r}")
    try:
        return getattr(models, model_class)(encoder, **task_args)
    except TypeError as e:
        raise ValueError(f"{source}: task_args {task_args} do not fit {model_class}: {e}") from e


def load_model(directory, dtype=None):
    """Rebuilds any bert_tf model saved in `directory` and reads its weights.

    Reads the newest `ckpt-N` of a training run, else the `weights`
    checkpoint of `save`. `dtype` is an optional Keras dtype policy name.

    Returns:
      (model, metadata dict).

    Raises:
      FileNotFoundError: no metadata or no weights in `directory`.
      ValueError: the metadata is invalid; `assign.CheckpointMismatchError`
        (a ValueError) names each missing variable or wrong shape.
    """
    metadata = read_metadata(directory)
    source = os.path.join(directory, METADATA_NAME)
    if "task" in metadata:
        metadata["task"] = validate_task_info(metadata["task"], f"{source} 'task'")
    model = build_model(metadata, source, dtype)
    restore_weights(model, directory)
    return model, metadata


def restore_weights(model, directory):
    """Reads every weight of `model` from `directory`'s newest checkpoint; returns its prefix.

    Raises `assign.CheckpointMismatchError` naming each missing variable or
    wrong shape.
    """
    prefix = weights_prefix(directory)
    slots = weight_map.task_slots(model)
    assign.assign_to_slots(slots, read_arrays(prefix, slots), f"bert_tf checkpoint {prefix}")
    return prefix
