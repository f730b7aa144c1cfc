"""The ops an export may contain: what the TF Serving 2.20 model server links.

Sources (checked for TF Serving 2.20 / tensorflow-text 2.20.1):
* tensorflow/serving `tensorflow_serving/model_servers/BUILD`: `server_lib`
  depends on `@org_tensorflow//tensorflow/core:tensorflow` (all TF core ops)
  plus `SUPPORTED_TENSORFLOW_OPS`, which for TF2 is
  `@org_tensorflow_text//tensorflow_text:ops_lib` (and the Decision Forests
  inference ops). Python callbacks (`tf.py_function`, `tf.numpy_function`)
  are registered by the Python package only and never run in the server.
* tensorflow/text `tensorflow_text/BUILD`: `ops_lib` links every op library
  the pip package ships (boise_offset_converter, byte_splitter,
  constrained_sequence, fast_bert_normalizer, fast_sentencepiece,
  fast_wordpiece, mst, ngrams, normalize, phrase, regex_split,
  sentence_breaking, sentencepiece, split_merge(_from_logits),
  state_based_sentence_breaker, trimmer, unicode_script, utf8_binarize,
  whitespace(_v2), wordpiece). `TF_TEXT_OPS` is the list of op names those
  libraries register in tensorflow-text 2.20.1.

`CORE_OPS` is deliberately the reviewed list of TF core ops bert_tf exports
use, not all ~1,900: a new op in an export fails the test until someone adds
it here; the tests check that every name listed is registered by TensorFlow
itself (not tensorflow-text, not a Python callback).

This list is the review gate, checked in the exporting process. That each op
is really there when served is checked apart from it: the export tests'
serving-contract script looks every op of every export up in the registry of a
fresh process holding only TensorFlow and tensorflow-text (what the server
links), with `PYTHON_ONLY_OPS` as the ops that registry has and the server lacks.
"""

TF_TEXT_OPS = frozenset({
    "CaseFoldUTF8", "ConstrainedSequence", "FastBertNormalize",
    "FastWordpieceTokenizeWithOffsets", "FindSourceOffsets", "MaxSpanningTree",
    "NormalizeUTF8", "NormalizeUTF8WithOffsetsMap", "PhraseTokenize",
    "RegexSplitWithOffsets", "RougeL", "SentenceFragments", "SentenceFragmentsV2",
    "SentencepieceDetokenizeOp", "SentencepieceIdToStringOp", "SentencepieceOp",
    "SentencepieceStringToIdOp", "SentencepieceTokenizeOp",
    "SentencepieceTokenizeWithOffsetsOp", "SentencepieceVocabSizeOp",
    "SplitMergeTokenizeWithOffsets", "TFText>BoiseTagsToOffsets",
    "TFText>ByteSplitByOffsets", "TFText>ByteSplitWithOffsets",
    "TFText>FastSentencepieceDetokenize", "TFText>FastSentencepieceTokenize",
    "TFText>FastWordpieceDetokenize", "TFText>NgramsStringJoin",
    "TFText>OffsetsToBoiseTags", "TFText>PhraseDetokenize",
    "TFText>RoundRobinGenerateMasks", "TFText>RoundRobinTrim", "TFText>Utf8Binarize",
    "TFText>WhitespaceTokenizeWithOffsetsV2", "TokenizerFromLogits",
    "UnicodeScriptTokenizeWithOffsets", "WhitespaceTokenizeWithOffsets",
    "WordpieceTokenizeWithOffsets",
})

CORE_OPS = frozenset({
    # graph plumbing, variables, save/restore
    "Const", "Identity", "IdentityN", "NoOp", "Placeholder", "StatefulPartitionedCall",
    "PartitionedCall", "If", "StatelessIf", "While", "StatelessWhile", "Assert",
    "VarHandleOp", "ReadVariableOp", "AssignVariableOp", "VarIsInitializedOp",
    "DisableCopyOnRead", "SaveV2", "RestoreV2", "MergeV2Checkpoints", "ShardedFilename",
    "StringJoin",
    # math
    "AddV2", "Sub", "Mul", "RealDiv", "FloorDiv", "FloorMod", "Neg", "Square", "Rsqrt",
    "Sqrt", "Exp", "Erf", "Tanh", "Maximum", "Minimum", "Sum", "Mean", "Max", "Prod",
    "Cumsum", "MatMul", "BatchMatMulV2", "BiasAdd", "Softmax", "ArgMax", "TopKV2",
    "Cast", "BitwiseAnd", "RightShift", "Min",
    # int8 exports (`bert_tf.layers.inference_projections`; stock CPU kernels)
    "QuantizeV2", "QuantizedMatMul", "Bitcast",
    # comparisons and logic
    "Equal", "NotEqual", "Greater", "GreaterEqual", "Less", "LessEqual", "LogicalAnd",
    "LogicalNot", "LogicalOr", "All", "Any", "Select", "SelectV2", "Where",
    # shapes and indexing
    "Shape", "Size", "Reshape", "ExpandDims", "Squeeze", "Transpose", "StridedSlice",
    "ConcatV2", "Pack", "Unpack", "Pad", "PadV2", "Tile", "Fill", "BroadcastTo",
    "Range", "ZerosLike", "OnesLike", "OneHot", "GatherV2", "GatherNd", "ScatterNd",
    "UnsortedSegmentSum", "InvertPermutation", "LowerBound", "UpperBound",
    # ragged tensors
    "RaggedGather", "RaggedRange", "RaggedTensorToTensor",
    # strings
    "StaticRegexFullMatch", "StringLower", "Substr", "UnicodeDecode",
    "UnicodeDecodeWithOffsets", "UnicodeEncode",
})

# Registered by the Python package only: a graph using them cannot be served.
PYTHON_ONLY_OPS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})

# Registered by TensorFlow core with a placeholder CPU kernel that only oneDNN's graph
# rewrite replaces (`mkl_qmatmul_op.cc`): with the rewrite off (TF_ENABLE_ONEDNN_OPTS=0,
# the default on CPUs without AVX512-VNNI, AVX512-BF16, AVX-VNNI or AMX) every call fails.
ONEDNN_ONLY_OPS = frozenset({
    "QuantizedMatMulWithBias", "QuantizedMatMulWithBiasAndDequantize",
    "QuantizedMatMulWithBiasAndRelu", "QuantizedMatMulWithBiasAndReluAndRequantize",
    "QuantizedMatMulWithBiasAndRequantize",
})

ALLOWED_OPS = (CORE_OPS | TF_TEXT_OPS) - PYTHON_ONLY_OPS - ONEDNN_ONLY_OPS


class DisallowedOpError(ValueError):
    """An exported graph uses an op the TF Serving model server does not link."""


def disallowed_ops(op_counts):
    """{op: count} of the ops in `op_counts` that are not allowed."""
    return {op: count for op, count in sorted(op_counts.items()) if op not in ALLOWED_OPS}


def check_ops(op_counts, source="graph"):
    """Raises `DisallowedOpError` naming every op of `op_counts` not allowed."""
    bad = disallowed_ops(op_counts)
    if bad:
        listed = ", ".join(f"{op} (x{count})" for op, count in bad.items())
        raise DisallowedOpError(
            f"{source} uses ops that TF Serving 2.20 does not link: {listed}; "
            "see bert_tf/export/op_allowlist.py")
