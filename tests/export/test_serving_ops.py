"""TF Serving contract: every op of every export (function library included)
is in the allowlist of ops the TF Serving 2.20 model server links."""

import json
import os
import subprocess
import sys

import pytest
import tensorflow as tf

from bert_tf.export import graph_ops, op_allowlist

_LIST_OPS = """
import json, sys
import tensorflow as tf
from tensorflow.core.framework import op_def_pb2
from tensorflow.python.client import pywrap_tf_session

def registered():
    ops = op_def_pb2.OpList.FromString(
        pywrap_tf_session.TF_GetBuffer(pywrap_tf_session.TF_GetAllOpList()))
    return sorted(op.name for op in ops.op)

core = registered()
import tensorflow_text
print(json.dumps({"core": core, "with_text": registered()}))
"""


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
def test_allowlist_names_real_core_and_text_ops():
    """CORE_OPS are registered by TensorFlow alone; TF_TEXT_OPS by tensorflow-text."""
    run = subprocess.run([sys.executable, "-c", _LIST_OPS], capture_output=True, text=True,
                         env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"), timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    registered = json.loads(run.stdout.strip().splitlines()[-1])
    core, with_text = set(registered["core"]), set(registered["with_text"])
    assert op_allowlist.CORE_OPS <= core, sorted(op_allowlist.CORE_OPS - core)
    assert not op_allowlist.CORE_OPS & op_allowlist.PYTHON_ONLY_OPS
    assert op_allowlist.TF_TEXT_OPS == with_text - core
    assert op_allowlist.PYTHON_ONLY_OPS <= core  # registered by the Python package
