"""CoNLL-2003 NER, feature-based (paper section 5.3 and Table 7).

The encoder is frozen; chosen hidden states (`model.feature_mix`) feed a
two-layer bidirectional LSTM and a per-token classifier
(`bert_tf.models.bert_feature_tagger.BertFeatureTagger`). Data, labels,
metrics and outputs are `ner`'s.
"""

import dataclasses

from bert_tf.layers.feature_mix import MIXES, layers_needed
from bert_tf.models.bert_feature_tagger import BertFeatureTagger
from bert_tf.tasks.base import experiment_class
from bert_tf.tasks.finetuning import FinetuningModelConfig
from bert_tf.tasks.ner import LABELS, NerDataConfig, NerTask


@dataclasses.dataclass
class FeatureTaggerModelConfig(FinetuningModelConfig):
    """The frozen encoder, which of its states feed the BiLSTM, and its width."""

    # One of bert_tf.layers.feature_mix.MIXES (the rows of the paper's Table 7).
    feature_mix: str = "concat_last_four"
    # Units per direction of each of the two BiLSTM layers.
    lstm_units: int = 384


NerFeaturesExperiment = experiment_class(
    "NerFeaturesExperiment", "ner_features", FeatureTaggerModelConfig, NerDataConfig,
    "A feature-based CoNLL-2003 NER run (frozen encoder + BiLSTM).")


class NerFeaturesTask(NerTask):
    """Trains a BiLSTM tagger on a frozen encoder's features; scores entity-level F1."""

    config_class = NerFeaturesExperiment
    name = "ner_features"
    # A BiLSTM would carry its state from one packed sentence into the next.
    packable = False

    def validate(self):
        model = self.model_config
        if model.feature_mix not in MIXES:
            raise ValueError(f"model.feature_mix must be one of {sorted(MIXES)}, "
                             f"got {model.feature_mix!r}")
        if model.lstm_units < 1:
            raise ValueError(f"model.lstm_units must be >= 1, got {model.lstm_units}")
        super().validate()

    def _task_model(self, encoder):
        mix = self.model_config.feature_mix
        layers = encoder.encoder_config.num_layers
        if layers < layers_needed(mix):
            raise ValueError(f"model.feature_mix {mix!r} needs an encoder of at least "
                             f"{layers_needed(mix)} layers; this one has {layers}")
        dropout = self.model_config.head_dropout
        return BertFeatureTagger(
            encoder, num_labels=len(LABELS), mix=self.model_config.feature_mix,
            lstm_units=self.model_config.lstm_units,
            dropout=encoder.encoder_config.hidden_dropout if dropout is None else dropout)

    def model_differences(self, old, new):
        differences = super().model_differences(old, new)
        for key in ("feature_mix", "lstm_units"):
            if getattr(old, key) != getattr(new, key):
                differences[f"model.{key}"] = (getattr(old, key), getattr(new, key))
        return differences
