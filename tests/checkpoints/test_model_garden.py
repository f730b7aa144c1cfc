"""Model Garden's BertEncoderV2 is our reference TF implementation."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.checkpoints import loading, model_garden, weight_map
from bert_tf.models import BertEncoder
from tests.helpers import TINY, max_abs_diff, random_inputs


def _garden_outputs(garden, inputs):
    outputs = garden(dict(input_word_ids=tf.constant(inputs["token_ids"]),
                          input_mask=tf.constant(inputs["padding_mask"]),
                          input_type_ids=tf.constant(inputs["segment_ids"])), training=False)
    return outputs["sequence_output"].numpy(), outputs["pooled_output"].numpy()


@pytest.mark.parametrize("activation", ["gelu", "gelu_tanh"])
def test_same_outputs_as_model_garden_both_ways(activation):
    encoder = BertEncoder.from_encoder_config(TINY.replace(hidden_act=activation))
    inputs = random_inputs(batch=3, length=12, pad_from=[12, 7, 3])
    ours = encoder(inputs, training=False)
    garden = model_garden.to_garden_encoder(encoder)
    sequence, pooled = _garden_outputs(garden, inputs)
    mask = inputs["padding_mask"].astype(bool)
    assert max_abs_diff(np.asarray(ours["sequence_output"])[mask], sequence[mask]) <= 1e-5
    assert max_abs_diff(ours["pooled_output"], pooled) <= 1e-5

    # And back: a fresh encoder filled from the Model Garden weights.
    fresh = BertEncoder.from_encoder_config(encoder.encoder_config)
    slots = weight_map.encoder_slots(fresh)
    for slot, value in model_garden.garden_arrays(garden, slots).items():
        next(s for s in slots if s.name == slot).variable.assign(value)
    again = fresh(inputs, training=False)
    assert max_abs_diff(again["sequence_output"], ours["sequence_output"]) == 0.0


def test_garden_checkpoint_is_detected_and_loaded(tmp_path):
    encoder = BertEncoder.from_encoder_config(TINY)
    model_garden.write_checkpoint(encoder, str(tmp_path))
    assert loading.detect_format(str(tmp_path)) == "garden"
    # The activation is not in the checkpoint: Model Garden's default is tanh.
    assert loading.load_encoder(str(tmp_path)).encoder_config.hidden_act == "gelu_tanh"
    loaded = loading.load_encoder(str(tmp_path), hidden_act="gelu")
    assert loaded.encoder_config == encoder.encoder_config
    inputs = random_inputs()
    assert max_abs_diff(loaded(inputs)["sequence_output"], encoder(inputs)["sequence_output"]) == 0


def test_a_written_garden_checkpoint_records_its_activation_and_vocabulary(tmp_path):
    # Written as Model Garden publishes BERT: bert_config.json and vocab.txt beside it.
    encoder = BertEncoder.from_encoder_config(TINY)  # the exact GELU
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                               + [f"w{i}" for i in range(TINY.vocab_size - 5)]) + "\n")
    out = str(tmp_path / "garden")
    loading.save(encoder, out, format="garden", vocab_file=str(vocab))
    info = loading.describe(out)
    assert (info.format, info.encoder_config) == ("garden", TINY)
    assert info.vocab_file == os.path.join(out, "vocab.txt")
    assert loading.load_encoder(out, hidden_act="gelu_tanh").encoder_config.hidden_act == \
        "gelu_tanh"  # an explicit activation still wins

    config_path = os.path.join(out, "bert_config.json")
    with open(config_path) as f:
        values = json.load(f)
    values["intermediate_size"] = 48
    with open(config_path, "w") as f:
        json.dump(values, f)
    with pytest.raises(ValueError, match=f"^{config_path}: intermediate_size 48, but the "
                                         "Model Garden checkpoint beside it has 64$"):
        loading.load_encoder(out)
