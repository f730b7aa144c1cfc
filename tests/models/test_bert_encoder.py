import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from bert_tf.models import BertEncoder, EncoderConfig, get_preset, preset_names
from tests.helpers import TINY, max_abs_diff, random_inputs


@pytest.mark.long  # builds BERT-base and BERT-large in a fresh process (about 20 s)
def test_published_parameter_counts():
    # The BERT paper's sizes, counted with the pooler and without heads. Built in a
    # process of their own: BERT-large's 1.3 GB of weights would otherwise stay in this
    # test worker's resident memory for the rest of the suite.
    code = ("from bert_tf.models import BertEncoder, get_preset\n"
            "for name in ('bert_base', 'bert_large'):\n"
            "    print(BertEncoder.from_encoder_config(get_preset(name)).count_params())")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["109482240", "335141888"]


def test_compact_presets_and_aliases():
    compact = [n for n in preset_names() if n.startswith("bert_L-")]
    assert len(compact) == 24
    for name in compact:
        config = get_preset(name)
        assert config.num_heads == config.hidden_size // 64
        assert config.intermediate_size == 4 * config.hidden_size
    expected = {"tiny": (2, 128), "mini": (4, 256), "small": (4, 512), "medium": (8, 512),
                "base": (12, 768), "large": (24, 1024)}
    for alias, (layers, hidden) in expected.items():
        config = get_preset(alias)
        assert (config.num_layers, config.hidden_size) == (layers, hidden)
    assert get_preset("bert_L-4_H-256_A-4") == get_preset("mini")
    with pytest.raises(ValueError, match="unknown encoder preset 'huge'"):
        get_preset("huge")


def test_config_validation_names_the_field():
    with pytest.raises(ValueError, match="hidden_size .* divisible by num_heads"):
        EncoderConfig(hidden_size=30, num_heads=4)
    with pytest.raises(ValueError, match="hidden_act='swish'"):
        EncoderConfig(hidden_act="swish")
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['hiden_size'\]"):
        EncoderConfig.from_dict({"hiden_size": 8})
    with pytest.raises(ValueError, match="num_layers must be int, got str '2'"):
        EncoderConfig.from_dict({"num_layers": "2"})


def test_outputs_and_shapes():
    encoder = BertEncoder.from_encoder_config(TINY)
    outputs = encoder(random_inputs(batch=3, length=7))
    assert tuple(outputs["sequence_output"].shape) == (3, 7, 32)
    assert tuple(outputs["pooled_output"].shape) == (3, 32)
    assert len(outputs["encoder_outputs"]) == 2
    np.testing.assert_array_equal(outputs["encoder_outputs"][-1], outputs["sequence_output"])
    # The pooler is a tanh dense layer on the first token.
    first = np.asarray(outputs["sequence_output"])[:, 0]
    expected = np.tanh(first @ encoder.pooler.kernel.numpy() + encoder.pooler.bias.numpy())
    assert max_abs_diff(outputs["pooled_output"], expected) < 1e-5


def test_padding_is_ignored():
    encoder = BertEncoder.from_encoder_config(TINY)
    inputs = random_inputs(batch=2, length=10, pad_from=[6, 10])
    base = encoder(inputs, training=False)["sequence_output"].numpy()
    changed = {k: v.copy() for k, v in inputs.items()}
    changed["token_ids"][0, 6:] = 55  # garbage under the mask
    other = encoder(changed, training=False)["sequence_output"].numpy()
    assert max_abs_diff(base[0, :6], other[0, :6]) < 1e-6
    # Without the mask the same change does move the real tokens.
    changed["padding_mask"][0, 6:] = 1
    unmasked = encoder(changed, training=False)["sequence_output"].numpy()
    assert max_abs_diff(base[0, :6], unmasked[0, :6]) > 1e-3


def test_dropout_only_in_training():
    encoder = BertEncoder.from_encoder_config(TINY.replace(hidden_dropout=0.3))
    inputs = random_inputs()
    a = encoder(inputs, training=False)["sequence_output"]
    b = encoder(inputs, training=False)["sequence_output"]
    c = encoder(inputs, training=True)["sequence_output"]
    assert max_abs_diff(a, b) == 0.0
    assert max_abs_diff(a, c) > 1e-3


def test_gelu_variants_differ():
    exact = BertEncoder.from_encoder_config(TINY)
    tanh = BertEncoder.from_encoder_config(TINY.replace(hidden_act="gelu_tanh"))
    tanh.set_weights(exact.get_weights())
    inputs = random_inputs()
    diff = max_abs_diff(exact(inputs)["sequence_output"], tanh(inputs)["sequence_output"])
    assert 0 < diff < 0.05


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision(policy):
    reference = BertEncoder.from_encoder_config(TINY)
    encoder = BertEncoder.from_encoder_config(TINY, dtype=policy)
    encoder.set_weights(reference.get_weights())
    assert all(v.dtype == "float32" for v in encoder.weights)
    attention = encoder.transformer_layers[0]
    assert attention.compute_dtype == policy.split("_")[1]
    inputs = random_inputs(pad_from=[5, 10])
    outputs = encoder(inputs, training=False)
    assert outputs["sequence_output"].dtype == policy.split("_")[1]
    expected = reference(inputs, training=False)["sequence_output"]
    # LayerNorm and softmax run in float32, so half precision stays close.
    tolerance = 0.05 if policy == "mixed_float16" else 0.15
    assert max_abs_diff(outputs["sequence_output"], expected) < tolerance
    assert np.isfinite(np.asarray(outputs["sequence_output"], np.float32)).all()


def test_get_config_round_trip():
    encoder = BertEncoder.from_encoder_config(TINY.replace(hidden_act="gelu_tanh"))
    clone = BertEncoder.from_config(encoder.get_config())
    assert clone.encoder_config == encoder.encoder_config
    clone.set_weights(encoder.get_weights())
    inputs = random_inputs()
    assert max_abs_diff(encoder(inputs)["pooled_output"], clone(inputs)["pooled_output"]) == 0


def test_keras_file_round_trip(tmp_path):
    encoder = BertEncoder.from_encoder_config(TINY, dtype="mixed_bfloat16")
    path = os.path.join(tmp_path, "encoder.keras")
    encoder.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded, BertEncoder)
    assert loaded.dtype_policy.name == "mixed_bfloat16"
    inputs = random_inputs()
    assert max_abs_diff(encoder(inputs)["sequence_output"], loaded(inputs)["sequence_output"]) == 0
