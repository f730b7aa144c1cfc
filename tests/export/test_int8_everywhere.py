"""The int8 SavedModel answers with oneDNN's graph rewrite on and off, whatever its batch-mates.

Every assertion runs on answers from fresh processes that import only
tensorflow and tensorflow_text, one with TF_ENABLE_ONEDNN_OPTS=0 (TensorFlow's
default on CPUs without AVX512-VNNI, AVX512-BF16, AVX-VNNI or AMX) and one
with =1.
"""

import dataclasses
import json

import numpy as np
import pytest

from tests.export.export_helpers import TASKS, build_model, serve_both_onednn_ways

# Two exports and two fresh processes: the file starts first.
pytestmark = pytest.mark.slow

TEXTS = ["The cat sat on the mat.", "ok", "Stocks fell sharply on Monday morning."]
# Long neighbours: 31 rows at the record's full length, with large and varied activations.
NEIGHBOURS = [" ".join(["extraordinarily", "zebra", "quantum", "1999", "!!"] * 4)[i:]
              for i in range(31)]


@pytest.fixture(scope="module")
def served(tmp_path_factory, tokenizer):
    """{setting: {export name: answers}} for TF_ENABLE_ONEDNN_OPTS 0 and 1."""
    from bert_tf.export import export_model

    base = tmp_path_factory.mktemp("int8_everywhere")
    # One text per request: its `encode` signature gives the pooled output too.
    record = dataclasses.replace(TASKS["classifier"], text_inputs=1)
    model = build_model("classifier", record, seed=3)
    # Weights 5x their initial scale (std 0.1): at std 0.02 the activations are too
    # small for int8's rounding to show in the outputs, and the test could not fail.
    for variable in model.encoder.variables:
        if variable.path.endswith(("kernel", "embeddings")):
            variable.assign(variable * 5.0)
    exports = {name: export_model(model, tokenizer, str(base / name), record,
                                  quantization=quantization)
               for name, quantization in (("float", None), ("int8", "int8"))}
    request = base / "request.json"
    request.write_text(json.dumps({"exports": exports, "texts": TEXTS,
                                   "neighbours": NEIGHBOURS}))
    return serve_both_onednn_ways(request)


def _array(answers, export, way, output):
    results = answers[export][way]
    if isinstance(results, dict):
        return np.array(results[output])
    return np.array([result[output] for result in results])


@pytest.mark.parametrize("setting", ["0", "1"])
def test_int8_answers_close_to_float_with_onednn_rewrite(served, setting):
    answers = served[setting]
    for way in ("alone", "batched"):
        for output, width, bound in (("probabilities", 2, 0.02), ("pooled_output", 32, 0.05)):
            floats = _array(answers, "float", way, output)
            int8 = _array(answers, "int8", way, output)
            assert floats.shape == int8.shape == (len(TEXTS), width)
            assert 0 < np.abs(floats - int8).max() < bound, (way, output)
    float_ids = _array(answers, "float", "ids", "probabilities")
    int8_ids = _array(answers, "int8", "ids", "probabilities")
    assert 0 < np.abs(float_ids - int8_ids).max() < 0.02


@pytest.mark.parametrize("setting", ["0", "1"])
def test_int8_answer_does_not_depend_on_batch_mates(served, setting):
    answers = served[setting]
    for output in ("pooled_output", "probabilities"):
        alone, batched = (_array(answers, "int8", way, output) for way in ("alone", "batched"))
        quantization_error = np.abs(_array(answers, "float", "alone", output) - alone).max()
        batch_mates = np.abs(alone - batched).max()
        # Far below what int8 itself changes: per-token ranges, exact integer products.
        assert batch_mates < quantization_error / 100, (output, batch_mates, quantization_error)


def test_int8_answers_agree_with_onednn_rewrite_on_and_off(served):
    for output in ("probabilities", "pooled_output"):
        np.testing.assert_allclose(_array(served["0"], "int8", "alone", output),
                                   _array(served["1"], "int8", "alone", output), atol=1e-5)
