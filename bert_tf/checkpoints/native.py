"""This project's own checkpoint format.

A directory holding:
  bert_tf_model.json   model type, encoder config, task arguments, bert_tf
                       version, the tokenizer contract and (under "task",
                       optional) the task record: see `task_record.TaskRecord`
  vocab.txt            the vocabulary (when known)
  weights.*  or ckpt-N.*   a TF object checkpoint whose `weights` dict maps
                       canonical names (see `weight_map`) to variables

The trainer writes its `ckpt-N` checkpoints into the same kind of directory,
with the same `weights` dict next to optimizer and input state, so a training
run's `model_dir` is itself loadable.
"""

import json
import logging
import os

import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

from bert_tf import storage
from bert_tf.checkpoints import assign, readable, weight_map
from bert_tf.checkpoints.json_file import read_json_object
from bert_tf.checkpoints.task_record import TaskRecord, kind_of_model
from bert_tf.version import __version__

METADATA_NAME = "bert_tf_model.json"
VOCAB_NAME = "vocab.txt"
WEIGHTS_PREFIX = "weights"
WEIGHTS_KEY = "weights"
FORMAT_VERSION = 1


def is_native(path):
    return storage.isdir(path) and storage.isfile(os.path.join(path, METADATA_NAME))


def is_native_checkpoint(path):
    """Whether `path` names one checkpoint (e.g. `run/ckpt-680`) of a bert_tf directory."""
    return (not storage.isdir(path) and storage.isfile(path + ".index")
            and is_native(os.path.dirname(path) or "."))


def model_metadata(model, tokenizer_contract=None, record=None):
    """The `bert_tf_model.json` object of `model` (encoder or task model).

    Args:
      model: a bert_tf encoder or task model.
      tokenizer_contract: the vocabulary's contract (`text.tokenizer_contract`), or None.
      record: a `TaskRecord`, stored under "task" (`record.to_dict()`), or None.
    """
    encoder = getattr(model, "encoder", model)
    task_args = {k: v for k, v in model.get_config().items()
                 if k not in ("name", "trainable", "encoder")
                 and k not in encoder.encoder_config.to_dict()}
    return {
        "format": "bert_tf",
        "format_version": FORMAT_VERSION,
        "bert_tf_version": __version__,
        "model_class": type(model).__name__,
        "task_args": task_args if model is not encoder else {},
        "encoder_config": encoder.encoder_config.to_dict(),
        "tokenizer": tokenizer_contract,
        **({"task": record.to_dict()} if record is not None else {}),
    }


def write_metadata(model, directory, tokenizer_contract=None, vocab_file=None, record=None):
    """Writes `bert_tf_model.json` (and copies the vocab) into `directory`.

    Args: see `model_metadata`; `vocab_file` is copied as `vocab.txt`.
    """
    storage.makedirs(directory, exist_ok=True)
    metadata = model_metadata(model, tokenizer_contract, record)
    path = os.path.join(directory, METADATA_NAME)
    with storage.atomic_write(path, encoding="utf-8") as f:
        json.dump(metadata, f, indent=2, sort_keys=True)
    if vocab_file and storage.abspath(vocab_file) != storage.abspath(
            os.path.join(directory, VOCAB_NAME)):
        storage.copy(vocab_file, os.path.join(directory, VOCAB_NAME))
    return metadata


def weights_dict(model):
    """The `{canonical name: variable}` dict stored under the `weights` key."""
    return {slot.name: slot.variable for slot in weight_map.task_slots(model)}


def default_record(model):
    """The record of an encoder or pretrainer saved without one, else None.

    Such a model embeds text whatever it was trained on; it is served at
    its longest input, `max_position_embeddings`. A task model's labels and
    length are known only to the task that trained it.
    """
    kind = {"BertEncoder": "encoder", "BertPretrainer": "pretrainer"}.get(type(model).__name__)
    if kind is None:
        return None
    encoder = getattr(model, "encoder", model)
    return TaskRecord(kind=kind, name=kind,
                      max_seq_length=encoder.encoder_config.max_position_embeddings)


def save(model, directory, tokenizer_contract=None, vocab_file=None, record=None):
    """Saves `model` in this project's format; returns the weights prefix.

    Args: see `model_metadata`. Without `record`, an encoder or pretrainer
    gets `default_record(model)`, so the directory exports as it is.
    """
    if record is None:
        record = default_record(model)
    write_metadata(model, directory, tokenizer_contract, vocab_file, record)
    checkpoint = tf.train.Checkpoint(**{WEIGHTS_KEY: weights_dict(model)})
    return checkpoint.write(os.path.join(directory, WEIGHTS_PREFIX))


def save_final_weights(run_dir: str, destination: str) -> list[str]:
    """Writes a training run's newest weights, without optimizer state, as a `save` directory.

    A training checkpoint carries the optimizer's two slots per weight and the
    input state, three times the weights' size; this keeps only what a
    fine-tuning run starts from. The metadata and vocabulary are copied as the
    run wrote them. The index file is written last, so a copy cut short is
    not taken for weights (`weights_prefix` looks for it).

    Args:
      run_dir: a trainer `model_dir` (or any directory `load_model` reads).
      destination: the directory to write (created if missing).

    Returns:
      The names of the files written into `destination`.
    """
    model, _ = load_model(run_dir)
    storage.makedirs(destination, exist_ok=True)
    partial = f"partial-{os.getpid()}"
    names = [METADATA_NAME] + ([VOCAB_NAME] if storage.isfile(os.path.join(run_dir, VOCAB_NAME))
                               else [])
    try:
        for name in names:
            with storage.atomic_write(os.path.join(destination, name), "wb") as f:
                f.write(storage.read_bytes(os.path.join(run_dir, name)))
        temporary = os.path.join(destination, f"{WEIGHTS_PREFIX}-{partial}")
        tf.train.Checkpoint(**{WEIGHTS_KEY: weights_dict(model)}).write(temporary)
        written = sorted(name for name in storage.listdir(destination)
                         if name.startswith(os.path.basename(temporary) + "."))
        for name in sorted(written, key=lambda name: name.endswith(".index")):
            final = WEIGHTS_PREFIX + name[len(os.path.basename(temporary)):]
            storage.rename(os.path.join(destination, name), os.path.join(destination, final))
            names.append(final)
    finally:
        # Nothing half-written stays behind (the destination may be committed).
        for name in storage.listdir(destination):
            if partial in name:
                path = os.path.join(destination, name)
                storage.rmtree(path) if storage.isdir(path) else storage.remove(path)
    return names


def read_metadata(directory):
    path = os.path.join(directory, METADATA_NAME)
    metadata = read_json_object(path)
    if metadata.get("format") != "bert_tf":
        raise ValueError(f"{path}: not a bert_tf model record (format={metadata.get('format')!r})")
    if metadata.get("format_version", 0) > FORMAT_VERSION:
        raise ValueError(
            f"{path}: format_version {metadata['format_version']} is newer than this "
            f"bert_tf ({__version__}) supports ({FORMAT_VERSION})")
    return metadata


def weights_prefixes(directory):
    """The training checkpoints in `directory`, newest first, else its saved weights.

    Raises:
      FileNotFoundError: `directory` has neither.
    """
    listed = readable.listed_checkpoints(directory)
    if listed:
        return listed
    prefix = os.path.join(directory, WEIGHTS_PREFIX)
    if storage.exists(prefix + ".index"):
        return [prefix]
    raise FileNotFoundError(f"{directory}: has {METADATA_NAME} but no weights checkpoint")


def weights_prefix(directory):
    """The newest training checkpoint in `directory`, else its saved weights (not read)."""
    return weights_prefixes(directory)[0]


def read_chosen_arrays(prefix, slots):
    """The arrays of the one checkpoint `prefix` names (no fallback to another step).

    Raises:
      readable.CheckpointReadError: it does not read back (the message names the file).
    """
    try:
        readable.read_every_tensor(prefix)
    except tf.errors.OpError as error:
        damage = readable.damage_of(prefix, error)
        raise readable.CheckpointReadError(
            f"checkpoint {prefix} does not read back ({damage}); name another checkpoint of "
            f"{os.path.dirname(prefix)}, or the directory for its newest that reads back"
        ) from None
    return read_arrays(prefix, slots)


def read_newest_arrays(directory, slots):
    """`(prefix, arrays)` of the newest checkpoint in `directory` that reads back.

    A checkpoint that does not read back (a checksum mismatch, a
    truncated index, a missing shard) is skipped with a warning naming the
    file and the reason, and the one read is named; nothing is renamed.

    Raises:
      FileNotFoundError: no checkpoint in `directory`.
      readable.CheckpointReadError: none of its checkpoints reads back.
    """
    def read(prefix):
        # The whole checkpoint, not only the weights: readers take the one training resumes from.
        readable.read_every_tensor(prefix)
        return read_arrays(prefix, slots)

    prefix, arrays, damaged = readable.newest_readable(directory, read,
                                                       weights_prefixes(directory))
    for damage in damaged:
        logging.warning("checkpoint %s does not read back (%s); reading %s instead",
                        damage.prefix, damage, prefix)
    return prefix, arrays


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
    reader = readable.checkpoint_reader(prefix)
    keys = _weights_checkpoint_keys(reader, prefix)
    return {slot.name: reader.get_tensor(keys[slot.name]) for slot in slots if slot.name in keys}


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
      (model, metadata dict); its "task", when present, is a `TaskRecord`.

    Raises:
      FileNotFoundError: no metadata or no weights in `directory`.
      ValueError: the metadata is invalid; `assign.CheckpointMismatchError`
        (a ValueError) names each missing variable or wrong shape.
    """
    metadata = read_metadata(directory)
    source = os.path.join(directory, METADATA_NAME)
    if "task" in metadata:
        metadata["task"] = TaskRecord.from_dict(metadata["task"], f"{source} 'task'")
    model = build_model(metadata, source, dtype)
    restore_weights(model, directory)
    return model, metadata


def restore_weights(model, directory):
    """Reads every weight of `model` from `directory`'s newest checkpoint that reads back.

    Returns the checkpoint's prefix. Raises `assign.CheckpointMismatchError`
    naming each missing variable or wrong shape, and `readable.CheckpointReadError`
    when no checkpoint reads back (see `read_newest_arrays`).
    """
    slots = weight_map.task_slots(model)
    prefix, arrays = read_newest_arrays(directory, slots)
    assign.assign_to_slots(slots, arrays, f"bert_tf checkpoint {prefix}")
    return prefix
