"""ONNX models made from an export's `serve_token_ids` signature, and ONNX Runtime sessions.

For the serving benchmark (`research.benchmarks.serving_runtimes`); needs the
`bench` extra (onnx, onnxruntime, tf2onnx).

tf2onnx's command line (`python -m tf2onnx.convert --saved-model DIR
--signature_def serve_token_ids`) cannot read our exports: it loads every
function of the SavedModel, and the text signatures hold tensorflow-text ops
(`FastWordpieceTokenizeWithOffsets`) that its process has not registered. Its
Python API on the loaded signature works: `tensorflow_text` is imported first,
the signature is wrapped in a `tf.function` of the token-id inputs, and
`tf2onnx.convert.from_function` converts that. The input checks of
`serve_token_ids` (`tf.debugging.assert_*`) are dropped by the conversion: an
ONNX model made this way accepts ids outside the vocabulary without a word.
"""

import os

# The token-id inputs of `serve_token_ids`, in the order ONNX models take them.
INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")
# The encoder outputs the ONNX models return (the export's `padding_mask` output
# is its input back).
OUTPUT_NAMES = ("pooled_output", "sequence_output")
OPSET = 17


def export_token_ids_onnx(export_dir: str, path: str, opset: int = OPSET) -> str:
    """Converts the `serve_token_ids` signature of an encoder export to an ONNX file.

    Args:
      export_dir: a bert_tf export version directory (`EXPORTS/NAME/<version>`)
        of an encoder (outputs `pooled_output` and `sequence_output`).
      path: the ONNX file to write (written whole or not at all).
      opset: the ONNX opset.

    Returns:
      `path`.
    """
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the ops of the text signatures)
    import tf2onnx

    # The loaded object owns the variables: it must live as long as the signature.
    loaded = tf.saved_model.load(export_dir)
    signature = loaded.signatures["serve_token_ids"]
    specs = [tf.TensorSpec([None, None], tf.int32, name=name) for name in INPUT_NAMES]

    @tf.function(input_signature=specs)
    def token_ids(input_word_ids, input_mask, input_type_ids):
        outputs = signature(input_word_ids=input_word_ids, input_mask=input_mask,
                            input_type_ids=input_type_ids)
        return {name: outputs[name] for name in OUTPUT_NAMES}

    temporary = path + ".tmp"
    tf2onnx.convert.from_function(token_ids, input_signature=specs, opset=opset,
                                  output_path=temporary)
    os.replace(temporary, path)
    return path


def quantize_int8(fp32_path: str, path: str, per_channel: bool = False) -> str:
    """ONNX Runtime's dynamic int8 quantization of an ONNX model's weights.

    Int8 weights (per tensor, or per output channel with `per_channel`);
    activations are quantized to uint8 at run time, per call.

    Args:
      fp32_path: the float model.
      path: the quantized model to write (written whole or not at all).
      per_channel: one scale per output channel of each weight.

    Returns:
      `path`.
    """
    from onnxruntime.quantization import QuantType, quantize_dynamic

    temporary = path + ".tmp"
    quantize_dynamic(fp32_path, temporary, weight_type=QuantType.QInt8,
                     per_channel=per_channel)
    os.replace(temporary, path)
    return path


def ort_session(path: str, threads: int, spinning: bool = True):
    """An ONNX Runtime CPU session with every graph optimisation and `threads` intra-op threads.

    Args:
      path: the ONNX model.
      threads: intra-op threads (one inter-op thread: the graph runs sequentially).
      spinning: let idle intra-op threads spin for work (ONNX Runtime's default,
        its fastest on idle cores; on cores shared with other busy processes the
        spinning threads take the cores from the work, and ORT slows down several times).
    """
    import onnxruntime as ort

    options = ort.SessionOptions()
    if not spinning:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def versions() -> dict:
    """Versions of the ONNX packages (for the records)."""
    import onnx
    import onnxruntime
    import tf2onnx

    return {"onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__,
            "tf2onnx": tf2onnx.__version__}
