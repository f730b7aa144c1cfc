"""Text: in-graph WordPiece tokenizer, segment packing, vocab building, masking.

Exports are lazy so that light users (e.g. the vocab builder, which only
needs `codepoint_tables`) do not import TensorFlow.
"""

_EXPORTS = {
    "BertTokenizer": "bert_tf.text.tokenizer",
    "BasicTokenizer": "bert_tf.text.basic_tokenizer",
    "SegmentPacker": "bert_tf.text.segment_packer",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'bert_tf.text' has no attribute {name!r}")
