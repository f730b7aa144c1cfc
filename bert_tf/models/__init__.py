"""BERT encoder and task models built from `bert_tf.layers`."""

from bert_tf.models.bert_classifier import BertClassifier
from bert_tf.models.bert_encoder import BertEncoder
from bert_tf.models.bert_feature_tagger import BertFeatureTagger
from bert_tf.models.bert_multiple_choice import BertMultipleChoice
from bert_tf.models.bert_pretrainer import BertPretrainer
from bert_tf.models.bert_span_labeler import BertSpanLabeler
from bert_tf.models.bert_token_classifier import BertTokenClassifier
from bert_tf.models.encoder_config import EncoderConfig
from bert_tf.models.presets import PRESETS, get_preset, preset_names
from bert_tf.models.text_model import TextModel

__all__ = [
    "EncoderConfig", "PRESETS", "get_preset", "preset_names", "BertEncoder",
    "BertPretrainer", "BertClassifier", "BertSpanLabeler", "BertTokenClassifier",
    "BertMultipleChoice", "BertFeatureTagger", "TextModel",
]
