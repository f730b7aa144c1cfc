"""Damaged checkpoints: readers take the newest that reads back; the trainer sets the rest aside.

The damage is real storage damage done to real checkpoint files: a byte of a
data shard flipped (its checksum no longer matches), an index truncated (not
an sstable), a shard deleted, an index deleted.
"""

import glob
import logging
import os

import numpy as np
import pytest
import tensorflow as tf

import bert_tf
from bert_tf.checkpoints import loading, native, readable, weight_map
from bert_tf.models import BertEncoder
from tests.helpers import TINY


def flip_a_byte(prefix):
    """Flips one byte in the middle of `prefix`'s (first) data shard."""
    shard = sorted(glob.glob(prefix + ".data-*"))[0]
    data = bytearray(open(shard, "rb").read())
    data[len(data) // 2] ^= 0xFF
    with open(shard, "wb") as f:
        f.write(data)


def truncate_index(prefix):
    with open(prefix + ".index", "r+b") as f:
        f.truncate(10)


def delete_shard(prefix):
    os.remove(sorted(glob.glob(prefix + ".data-*"))[0])


def _four_checkpoints(directory):
    """ckpt-1..4 of one variable holding the checkpoint's number; their manager's checkpoint."""
    value = tf.Variable(tf.zeros([4096]))
    checkpoint = tf.train.Checkpoint(value=value)
    manager = tf.train.CheckpointManager(checkpoint, directory, max_to_keep=4)
    for number in range(1, 5):
        value.assign(tf.fill([4096], float(number)))
        manager.save(checkpoint_number=number)
    return checkpoint, value


def test_the_newest_checkpoint_that_reads_back_is_found_and_the_damaged_set_aside(tmp_path):
    directory = str(tmp_path)
    checkpoint, value = _four_checkpoints(directory)
    prefix = os.path.join(directory, "ckpt-{}").format
    flip_a_byte(prefix(4))
    truncate_index(prefix(3))
    delete_shard(prefix(2))

    found, _, damaged = readable.newest_readable(directory)
    assert found == prefix(1)
    assert [d.prefix for d in damaged] == [prefix(4), prefix(3), prefix(2)]
    assert damaged[0].file.startswith(prefix(4) + ".data-")
    assert "Checksum does not match" in damaged[0].reason
    assert damaged[1].file == prefix(3) + ".index" and "sstable" in damaged[1].reason
    assert damaged[2].file.startswith(prefix(2) + ".data-")
    assert "No such file" in damaged[2].reason

    for damage in damaged:
        assert readable.set_aside(damage.prefix) == damage.prefix + ".damaged"
    # The files are kept for inspection; the state file lists only the good one.
    assert sorted(os.listdir(prefix(4) + ".damaged")) == ["ckpt-4.data-00000-of-00001",
                                                          "ckpt-4.index"]
    assert readable.listed_checkpoints(directory) == [prefix(1)]
    assert tf.train.latest_checkpoint(directory) == prefix(1)

    # A new manager neither restores them nor counts them against max_to_keep.
    manager = tf.train.CheckpointManager(checkpoint, directory, max_to_keep=2)
    checkpoint.restore(manager.latest_checkpoint).assert_existing_objects_matched()
    assert float(value[0]) == 1.0
    manager.save(checkpoint_number=4)
    assert manager.checkpoints == [prefix(1), prefix(4)]
    assert os.path.isdir(prefix(4) + ".damaged")
    # Damaged again at the same number: set aside next to the first.
    flip_a_byte(prefix(4))
    assert readable.set_aside(prefix(4)) == prefix(4) + ".damaged-2"


def test_when_no_checkpoint_reads_back_one_error_names_each(tmp_path):
    directory = str(tmp_path)
    _four_checkpoints(directory)
    prefix = os.path.join(directory, "ckpt-{}").format
    flip_a_byte(prefix(4))
    truncate_index(prefix(3))
    delete_shard(prefix(2))
    os.remove(prefix(1) + ".index")
    with pytest.raises(readable.CheckpointReadError) as error:
        readable.newest_readable(directory)
    message = str(error.value)
    assert "\n" not in message
    for number, what in ((4, "Checksum does not match"), (3, "ckpt-3.index: file is too short"),
                         (2, "No such file"), (1, "ckpt-1.index: the index file is missing")):
        assert prefix(number) in message and what in message, message
    assert "start over" in message and "--model_dir" in message
    # Nothing is moved: a reader never renames.
    assert len(readable.listed_checkpoints(directory)) == 4


@pytest.mark.parametrize("damage", [flip_a_byte, truncate_index])
def test_load_encoder_reads_the_newest_run_checkpoint_that_reads_back(tmp_path, caplog, damage):
    # A training run's layout: the metadata and ckpt-N holding the `weights` dict.
    encoder = BertEncoder.from_encoder_config(TINY)
    native.write_metadata(encoder, str(tmp_path))
    checkpoint = tf.train.Checkpoint(weights=native.weights_dict(encoder))
    manager = tf.train.CheckpointManager(checkpoint, str(tmp_path), max_to_keep=3)
    expected = {}
    for step in (1, 2):
        for slot in weight_map.encoder_slots(encoder):
            slot.variable.assign(tf.random.normal(slot.variable.shape, seed=step))
        expected[step] = {s.name: s.variable.numpy() for s in weight_map.encoder_slots(encoder)}
        manager.save(checkpoint_number=step)
    damage(os.path.join(str(tmp_path), "ckpt-2"))

    with caplog.at_level(logging.WARNING):
        loaded = bert_tf.load_encoder(str(tmp_path))
    for slot in weight_map.encoder_slots(loaded):
        np.testing.assert_array_equal(slot.variable.numpy(), expected[1][slot.name])
    warning = [r.getMessage() for r in caplog.records if "does not read back" in r.getMessage()]
    assert len(warning) == 1 and "ckpt-2" in warning[0] and "ckpt-1 instead" in warning[0]
    # Readers leave the damaged checkpoint where it is.
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-2")


def test_one_named_run_checkpoint_loads_that_step_or_fails_naming_it(tmp_path):
    encoder = BertEncoder.from_encoder_config(TINY)
    native.write_metadata(encoder, str(tmp_path))
    checkpoint = tf.train.Checkpoint(weights=native.weights_dict(encoder))
    manager = tf.train.CheckpointManager(checkpoint, str(tmp_path), max_to_keep=3)
    expected = {}
    for step in (1, 2, 3):
        for slot in weight_map.encoder_slots(encoder):
            slot.variable.assign(tf.random.normal(slot.variable.shape, seed=step))
        expected[step] = {s.name: s.variable.numpy() for s in weight_map.encoder_slots(encoder)}
        manager.save(checkpoint_number=step)
    chosen = os.path.join(str(tmp_path), "ckpt-2")
    assert loading.detect_format(chosen) == "bert_tf"
    loaded = bert_tf.load_encoder(chosen)
    for slot in weight_map.encoder_slots(loaded):
        np.testing.assert_array_equal(slot.variable.numpy(), expected[2][slot.name])
    # A named checkpoint that does not read back is an error, never another step's weights.
    flip_a_byte(chosen)
    with pytest.raises(readable.CheckpointReadError) as raised:
        bert_tf.load_encoder(chosen)
    assert f"checkpoint {chosen} does not read back" in str(raised.value)
    assert "Checksum does not match" in str(raised.value)
