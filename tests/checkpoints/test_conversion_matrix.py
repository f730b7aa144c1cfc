"""The conversion matrix: every ordered pair of the five formats, by the converter.

One tiny encoder with random weights (biases and LayerNorm included, so that a
swapped or mis-reshaped weight shows) is written in each format, converted to
each format with `python -m bert_tf.convert` (its `main(argv)`), and the result
is read by the target format's own reference (`reference_loaders`): its outputs
must match the original encoder's on unpadded positions within 1e-5.

What a format cannot carry is refused in one line: the exact GELU by KerasHub
(its `BertBackbone` has the tanh form only), MLM/NSP heads by Model Garden and
KerasHub (encoder-only formats).
"""

import dataclasses
import json
import os

import numpy as np
import pytest

from bert_tf.checkpoints import loading, weight_map
from bert_tf.layers.activations import EXACT_GELU_NAMES, TANH_GELU_NAMES
from bert_tf.models import BertEncoder, BertPretrainer
from tests.checkpoints.conversion_steps import (
    FORMATS,
    convert_pair,
    pair_dir,
    write_source,
)
from tests.checkpoints.reference_loaders import reference_outputs, unpadded_differences
from tests.helpers import TINY, max_abs_diff, random_inputs

PARITY = 1e-5
TANH = TINY.replace(hidden_act="gelu_tanh")  # every format carries it, KerasHub included
EXACT = TINY  # the exact GELU, as Hugging Face's "gelu"
HEAD_FORMATS = ("bert_tf", "hf", "google")  # the formats that store MLM/NSP heads
ENCODER_ONLY = ("garden", "kerashub")
EXACT_CARRIERS = ("bert_tf", "hf", "google", "garden")  # KerasHub has the tanh GELU only
INPUTS = random_inputs(batch=3, length=16, pad_from=[16, 9, 4])
MASKED_POSITIONS = np.array([[1, 5, 9], [2, 3, 7], [1, 2, 3]], "int32")
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _randomise(model, seed):
    """Random weights; LayerNorm scales near 1, so that activations keep their size
    and the two GELUs differ well above the bound."""
    rng = np.random.default_rng(seed)
    for slot in weight_map.model_slots(model):
        value = rng.normal(0.0, 0.2, tuple(slot.variable.shape))
        slot.variable.assign((value + slot.name.endswith("/gamma")).astype("float32"))
    return model


def _vocab_file(directory):
    path = os.path.join(directory, "vocab.txt")
    with open(path, "w") as f:
        f.write("\n".join(SPECIALS + [f"w{i}" for i in range(TINY.vocab_size - 5)]) + "\n")
    return path


def _outputs(encoder):
    outputs = encoder(INPUTS, training=False)
    return np.asarray(outputs["sequence_output"]), np.asarray(outputs["pooled_output"])


@dataclasses.dataclass
class Matrix:
    """An encoder written in `sources`, and every conversion's (code, stdout, stderr)."""

    config: object
    original: tuple
    sources: dict
    conversions: dict
    root: str

    def output_dir(self, source, target):
        return pair_dir(self.root, source, target)


def _build_matrix(root, config, sources, targets, seed):
    encoder = _randomise(BertEncoder.from_encoder_config(config), seed)
    vocab = _vocab_file(root)
    written = {fmt: write_source(encoder, fmt, os.path.join(root, f"source_{fmt}"), vocab)
               for fmt in sources}
    conversions = {(s, t): convert_pair(written[s], s, t, pair_dir(root, s, t))
                   for s in sources for t in targets}
    return Matrix(config, _outputs(encoder), written, conversions, root)


@pytest.fixture(scope="module")
def tanh_matrix(tmp_path_factory):
    """The tanh-GELU encoder in all five formats, converted to all five: 25 pairs."""
    return _build_matrix(str(tmp_path_factory.mktemp("tanh")), TANH, FORMATS, FORMATS, seed=1)


@pytest.fixture(scope="module")
def exact_matrix(tmp_path_factory):
    """The exact-GELU encoder in the four formats that carry it, converted among them."""
    return _build_matrix(str(tmp_path_factory.mktemp("exact")), EXACT, EXACT_CARRIERS,
                         EXACT_CARRIERS, seed=2)


def _assert_converted(matrix, source, target):
    code, out, err = matrix.conversions[(source, target)]
    assert code == 0, err
    report = json.loads(out)
    assert (report["input_format"], report["output_format"]) == (source, target)
    assert report["variables_initialised"] == []
    output_dir = matrix.output_dir(source, target)
    assert loading.detect_format(output_dir) == target
    # The activation travelled, as bert_tf reads the written checkpoint back
    # (Hugging Face names the tanh form "gelu_new").
    same_form = EXACT_GELU_NAMES if matrix.config.hidden_act == "gelu" else TANH_GELU_NAMES
    assert loading.describe(output_dir).encoder_config.hidden_act in same_form
    ours = reference_outputs(target, output_dir, INPUTS, matrix.config)
    sequence, pooled = unpadded_differences(ours, matrix.original, INPUTS["padding_mask"])
    assert sequence <= PARITY and pooled <= PARITY, (sequence, pooled)


@pytest.mark.parametrize("target", FORMATS)
@pytest.mark.parametrize("source", FORMATS)
def test_every_pair_converts_with_the_same_outputs(tanh_matrix, source, target):
    _assert_converted(tanh_matrix, source, target)


def test_the_sources_are_read_by_their_references(tanh_matrix):
    for fmt, path in tanh_matrix.sources.items():
        ours = reference_outputs(fmt, path, INPUTS, TANH)
        sequence, pooled = unpadded_differences(ours, tanh_matrix.original,
                                                INPUTS["padding_mask"])
        assert sequence <= PARITY and pooled <= PARITY, fmt


def test_the_activation_is_visible_at_this_tolerance(tanh_matrix):
    # The same weights with the other GELU (about 1e-3 away): the matrix would see a
    # lost or swapped activation.
    exact = _outputs(_exact_twin(tanh_matrix.sources["bert_tf"]))
    sequence, pooled = unpadded_differences(exact, tanh_matrix.original, INPUTS["padding_mask"])
    assert max(sequence, pooled) > 10 * PARITY


def _exact_twin(native_dir):
    """The encoder of `native_dir` with the exact GELU in place of its tanh form."""
    encoder = loading.load_encoder(native_dir)
    twin = BertEncoder.from_encoder_config(encoder.encoder_config.replace(hidden_act="gelu"))
    for a, b in zip(weight_map.encoder_slots(encoder), weight_map.encoder_slots(twin),
                    strict=True):
        b.variable.assign(a.variable)
    return twin


@pytest.mark.long
@pytest.mark.parametrize("target", EXACT_CARRIERS)
@pytest.mark.parametrize("source", EXACT_CARRIERS)
def test_the_exact_gelu_travels_through_every_format_that_carries_it(exact_matrix, source,
                                                                     target):
    _assert_converted(exact_matrix, source, target)


@pytest.mark.parametrize("source", ["hf", "garden"])
def test_kerashub_refuses_the_exact_gelu_in_one_line(tmp_path, source):
    # From Hugging Face (where it is the default) and from Model Garden (whose
    # checkpoint records it in bert_config.json).
    encoder = _randomise(BertEncoder.from_encoder_config(EXACT), seed=3)
    source_dir = write_source(encoder, source, str(tmp_path / "source"), _vocab_file(tmp_path))
    out = str(tmp_path / "preset")
    code, stdout, err = convert_pair(source_dir, source, "kerashub", out)
    assert code == 2 and stdout == ""
    assert err == ("error: KerasHub's BertBackbone uses the tanh GELU; this encoder's "
                   "hidden_act is 'gelu', so its outputs would differ\n")
    assert not os.path.exists(out)


@pytest.fixture(scope="module")
def head_sources(tmp_path_factory):
    """A pretrainer (random heads) in the three formats with heads: (it, {format: dir})."""
    root = str(tmp_path_factory.mktemp("heads"))
    pretrainer = _randomise(BertPretrainer(BertEncoder.from_encoder_config(TANH)), seed=4)
    vocab = _vocab_file(root)
    return pretrainer, {fmt: write_source(pretrainer, fmt, os.path.join(root, f"source_{fmt}"),
                                          vocab) for fmt in HEAD_FORMATS}


def _head_outputs(pretrainer):
    outputs = pretrainer({**INPUTS, "masked_lm_positions": MASKED_POSITIONS}, training=False)
    return np.asarray(outputs["mlm_logits"]), np.asarray(outputs["nsp_logits"])


# Google's pretrained heads into Hugging Face, the usual move, in the fast suite.
HEAD_PAIRS = [pytest.param(s, t, marks=() if (s, t) == ("google", "hf") else pytest.mark.long)
              for s in HEAD_FORMATS for t in HEAD_FORMATS]


@pytest.mark.parametrize("source, target", HEAD_PAIRS)
def test_heads_travel_among_the_formats_that_hold_them(head_sources, tmp_path, source,
                                                       target):
    pretrainer, sources = head_sources
    out = str(tmp_path / target)
    code, stdout, err = convert_pair(sources[source], source, target, out,
                                     "--model", "pretrainer")
    assert code == 0, err
    report = json.loads(stdout)
    assert report["model"] == "BertPretrainer" and report["variables_initialised"] == []
    loaded = loading.load_pretrainer(out, format=target)
    for ours, theirs in zip(_head_outputs(loaded), _head_outputs(pretrainer), strict=True):
        assert max_abs_diff(ours, theirs) <= PARITY


@pytest.mark.parametrize("target", ENCODER_ONLY)
def test_heads_are_refused_by_encoder_only_formats_in_one_line(head_sources, tmp_path, target):
    _, sources = head_sources
    out = str(tmp_path / target)
    code, stdout, err = convert_pair(sources["hf"], "hf", target, out, "--model", "pretrainer")
    assert code == 2 and stdout == ""
    assert err == (f"error: format {target!r} holds an encoder only: the pretrainer's MLM "
                   "and NSP heads would be lost; write its encoder (--model encoder)\n")
    assert not os.path.exists(out)
    # The encoder alone converts.
    assert convert_pair(sources["hf"], "hf", target, out)[0] == 0
