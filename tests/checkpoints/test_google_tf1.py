"""Google TF1 checkpoints: the real BERT-Mini index and a TF1 copy of MiniLM."""

import json
import os
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.checkpoints import google_tf1, loading, weight_map
from bert_tf.checkpoints.assign import CheckpointMismatchError
from bert_tf.models import BertEncoder, BertPretrainer
from tests.checkpoints.test_hugging_face import assert_matches_reference, encoder_outputs
from tests.helpers import TINY

MINI_DIR = ("checkpoints", "google_bert_mini_uncased_L-4_H-256_A-4_partial")


def _index_variables(shared_file):
    prefix = os.path.join(shared_file(*MINI_DIR, "bert_model.ckpt.index"))[: -len(".index")]
    return prefix, dict(tf.train.list_variables(prefix))


def test_every_variable_of_the_real_index_is_mapped(shared_file):
    prefix, listed = _index_variables(shared_file)
    config = google_tf1.read_config(os.path.dirname(prefix))
    assert config.hidden_act == "gelu_tanh"  # google-research/bert's "gelu"
    pretrainer = BertPretrainer(BertEncoder.from_encoder_config(config))
    slots = {slot.name: slot for slot in weight_map.model_slots(pretrainer)}
    assert set(slots) == set(listed)
    for name, shape in listed.items():
        expected = tuple(shape)
        ours = tuple(slots[name].variable.shape)
        if slots[name].kind == weight_map.TRANSPOSED_KERNEL:
            ours = ours[::-1]
        assert ours == expected, name


def test_partial_checkpoint_without_data_shard_fails_clearly(shared_file):
    prefix, _ = _index_variables(shared_file)
    with pytest.raises(ValueError, match=r"bert/.* data cannot be read|\.data-\* shard"):
        loading.load_encoder(os.path.dirname(prefix))


def _minilm_tf1_names(listed, num_layers):
    """The real index's names, with its 4 layers generalised to `num_layers`."""
    names = set()
    for name in listed:
        if re.match(r"bert/encoder/layer_\d+/", name):
            for i in range(num_layers):
                names.add(re.sub(r"layer_\d+", f"layer_{i}", name))
        else:
            names.add(name)
    return names


def test_tf1_checkpoint_of_minilm_reproduces_reference(
        tmp_path, shared_file, reference_file, minilm_dir):
    _, listed = _index_variables(shared_file)
    source = loading.load(minilm_dir, "pretrainer")  # HF encoder; heads initialised
    out = os.path.join(tmp_path, "minilm_tf1")
    google_tf1.write(source.model, out, vocab_file=os.path.join(minilm_dir, "vocab.txt"))
    written = dict(tf.train.list_variables(os.path.join(out, "bert_model.ckpt")))
    # Exactly the real index's names (for 6 layers instead of 4), nothing else.
    assert set(written) == _minilm_tf1_names(listed, num_layers=6)
    with open(os.path.join(out, "bert_config.json")) as f:
        assert json.load(f)["bert_tf_hidden_act"] == "gelu"

    result = loading.load(out)
    assert result.format == "google"
    reference = np.load(reference_file("minilm_l6_reference.npz"))
    assert_matches_reference(encoder_outputs(result.model, reference), reference)


def test_round_trip_is_exact_including_heads(tmp_path):
    encoder = BertEncoder.from_encoder_config(TINY.replace(hidden_act="gelu_tanh"))
    pretrainer = BertPretrainer(encoder)
    google_tf1.write(pretrainer, tmp_path)
    with open(os.path.join(tmp_path, "bert_config.json")) as f:
        assert json.load(f)["hidden_act"] == "gelu"  # Google's name for the tanh form
    loaded = loading.load_pretrainer(str(tmp_path))
    assert loaded.encoder.encoder_config == pretrainer.encoder.encoder_config
    for a, b in zip(weight_map.model_slots(pretrainer), weight_map.model_slots(loaded)):
        assert a.name == b.name
        np.testing.assert_array_equal(a.variable.numpy(), b.variable.numpy())


def test_shape_mismatch_names_the_variable(tmp_path):
    google_tf1.write(BertEncoder.from_encoder_config(TINY), tmp_path)
    config_path = os.path.join(tmp_path, "bert_config.json")
    with open(config_path) as f:
        config = json.load(f)
    config["intermediate_size"] = 48
    with open(config_path, "w") as f:
        json.dump(config, f)
    with pytest.raises(CheckpointMismatchError) as error:
        loading.load_encoder(str(tmp_path))
    message = str(error.value)
    assert "bert/encoder/layer_0/intermediate/dense/kernel" in message
    assert "expected shape (32, 48), found (32, 64)" in message


def test_missing_variable_is_named(tmp_path):
    encoder = BertEncoder.from_encoder_config(TINY)
    slots = [s for s in weight_map.encoder_slots(encoder) if "pooler" not in s.name]
    tf.raw_ops.SaveV2(prefix=os.path.join(tmp_path, "bert_model.ckpt"),
                      tensor_names=[s.name for s in slots], shape_and_slices=[""] * len(slots),
                      tensors=[s.variable.numpy() for s in slots])
    google_tf1.write(encoder, os.path.join(tmp_path, "full"))
    shutil.copy(os.path.join(tmp_path, "full", "bert_config.json"), tmp_path)
    with pytest.raises(CheckpointMismatchError, match=r"missing variable "
                       r"'bert/pooler/dense/kernel' \(expected shape \(32, 32\)\)"):
        loading.load_encoder(str(tmp_path))
