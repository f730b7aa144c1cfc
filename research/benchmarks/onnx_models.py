"""ONNX Runtime sessions on the ONNX exports (`python -m bert_tf.export --format onnx`).

For the serving benchmark (`research.benchmarks.serving_runtimes`); needs the
`bench` extra (onnx, onnxruntime, tf2onnx).
"""

# The encoder outputs the timed contenders return.
OUTPUT_NAMES = ("pooled_output", "sequence_output")


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
