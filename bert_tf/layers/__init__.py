"""Keras 3 layers of BERT: embeddings, self-attention, Transformer block, heads.

`fast_ops` holds the train-step ops with hand-written gradients that the
layers use (LayerNorm, exact GELU, attention softmax, dropout masks).

Shape legend used in comments throughout the package:
B batch, S sequence length, T key sequence length, N attention heads,
H head size, D hidden size, I intermediate size, V vocabulary size,
P masked positions per sequence, C choices, L labels.
"""

from bert_tf.layers.bert_dropout import BertDropout
from bert_tf.layers.bert_embeddings import BertEmbeddings
from bert_tf.layers.bert_layer_norm import BertLayerNorm
from bert_tf.layers.bert_self_attention import BertSelfAttention
from bert_tf.layers.classification_head import ClassificationHead
from bert_tf.layers.dropout_dense_head import DropoutDenseHead
from bert_tf.layers.masked_lm_head import MaskedLMHead
from bert_tf.layers.multiple_choice_head import MultipleChoiceHead
from bert_tf.layers.next_sentence_head import NextSentenceHead
from bert_tf.layers.span_head import SpanHead
from bert_tf.layers.text_preprocessor import TextPreprocessor
from bert_tf.layers.token_classification_head import TokenClassificationHead
from bert_tf.layers.transformer_block import TransformerBlock

__all__ = [
    "BertDropout", "BertLayerNorm", "BertEmbeddings", "BertSelfAttention",
    "TransformerBlock", "MaskedLMHead", "NextSentenceHead", "ClassificationHead", "SpanHead",
    "TokenClassificationHead", "MultipleChoiceHead", "DropoutDenseHead", "TextPreprocessor",
]
