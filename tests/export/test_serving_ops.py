"""TF Serving contract: every op of every export (function library included)
is in the allowlist of ops the TF Serving 2.20 model server links (the reviewed list;
test_serving_contract.py checks the same exports against a fresh process's registry)."""

import pytest
import tensorflow as tf

from bert_tf.export import graph_ops, op_allowlist
from tests.export.export_helpers import run_serving_contract


def test_every_export_uses_allowed_ops_only(exports):
    for kind, (_, _, path) in exports.items():
        ops = graph_ops.saved_model_ops(path)
        # The graph holds the model and the tokenizer, inside functions.
        assert "FastWordpieceTokenizeWithOffsets" in ops, kind
        assert "BatchMatMulV2" in ops, kind
        op_allowlist.check_ops(ops, source=path)


def test_check_fails_on_a_python_callback(tmp_path):
    """Positive control: a SavedModel whose function calls back into Python."""
    module = tf.Module()
    module.f = tf.function(
        lambda x: tf.numpy_function(lambda v: v * 2, [x], tf.float32),
        input_signature=[tf.TensorSpec([None], tf.float32)])
    tf.saved_model.save(module, str(tmp_path))
    ops = graph_ops.saved_model_ops(str(tmp_path))
    assert "PyFunc" in ops  # found inside the function library, not the top graph
    with pytest.raises(op_allowlist.DisallowedOpError, match=r"PyFunc \(x1\)"):
        op_allowlist.check_ops(ops, source=str(tmp_path))


def test_check_fails_on_an_unlisted_op():
    with pytest.raises(op_allowlist.DisallowedOpError,
                       match=r"in_graph uses ops .*: MyCustomOp \(x2\);"):
        op_allowlist.check_ops({"MatMul": 3, "MyCustomOp": 2}, source="in_graph")


@pytest.mark.slow
def test_allowlist_names_real_core_and_text_ops(tmp_path):
    """CORE_OPS are registered by TensorFlow alone; TF_TEXT_OPS by tensorflow-text (the
    registries of the fresh serving-contract process, which checks no export here)."""
    registry = run_serving_contract([], str(tmp_path))["registry"]
    core, text = set(registry["core"]), set(registry["text"])
    assert registry["serving_protos"] == []
    assert op_allowlist.CORE_OPS <= core, sorted(op_allowlist.CORE_OPS - core)
    assert not op_allowlist.CORE_OPS & op_allowlist.PYTHON_ONLY_OPS
    assert op_allowlist.TF_TEXT_OPS == text
    assert op_allowlist.PYTHON_ONLY_OPS <= core  # registered by the Python package
