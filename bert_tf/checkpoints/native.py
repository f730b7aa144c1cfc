"""This project's own checkpoint format.

A directory holding:
  bert_tf_model.json   model type, encoder config, task arguments, bert_tf
                       version and the tokenizer contract
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
from bert_tf.checkpoints import weight_map
from bert_tf.checkpoints.json_file import read_json_object

METADATA_NAME = "bert_tf_model.json"
VOCAB_NAME = "vocab.txt"
WEIGHTS_PREFIX = "weights"
WEIGHTS_KEY = "weights"
FORMAT_VERSION = 1


def is_native(path):
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, METADATA_NAME))


def model_metadata(model, tokenizer_contract=None):
    """The metadata record of `model` (encoder or task model)."""
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
    }


def write_metadata(model, directory, tokenizer_contract=None, vocab_file=None):
    """Writes `bert_tf_model.json` (and copies the vocab) into `directory`."""
    os.makedirs(directory, exist_ok=True)
    metadata = model_metadata(model, tokenizer_contract)
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


def save(model, directory, tokenizer_contract=None, vocab_file=None):
    """Saves `model` in this project's format; returns the weights prefix."""
    write_metadata(model, directory, tokenizer_contract, vocab_file)
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
