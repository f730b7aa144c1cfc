"""CoNLL-2003 named-entity recognition: one label per word, scored per entity.

Each word of a sentence is WordPiece-tokenized; the word's label is
predicted from its first piece (the other pieces are not scored), as in the
BERT paper (section 5.3). Training labels are the file's tags converted to
IOB2, so every entity starts with a `B-` tag; predictions map back to one
tag per original word and are scored with conlleval's entity-level
precision, recall and F1.

Shapes: N sentences, S sequence length, K labels.
"""

import dataclasses
import json

import numpy as np
import tensorflow as tf

from bert_tf import storage
from bert_tf.data import conll2003
from bert_tf.models.bert_token_classifier import BertTokenClassifier
from bert_tf.tasks import conll_metrics
from bert_tf.tasks.finetuning import (
    FinetuningDataConfig,
    FinetuningTask,
    experiment_class,
    output_path,
    source_name,
)

LABELS = conll2003.CONLL_LABELS
OUTSIDE = "O"
LABEL_SCHEMES = ("iob1", "iob2")


@dataclasses.dataclass
class NerDataConfig(FinetuningDataConfig):
    """CoNLL-format files: `word POS chunk NER` per line."""

    # Required: the training file (eng.train) and the evaluation files
    # (eng.testa, eng.testb), e.g. --set 'data.eval_files=[eng.testa, eng.testb]'.
    train_file: str = ""
    eval_files: list[str] = dataclasses.field(default_factory=list)
    # The tag scheme of the files, which predictions are written in: "iob1"
    # (the original CoNLL-2003 files) or "iob2". Training always uses IOB2.
    label_scheme: str = "iob1"

    def __post_init__(self):
        if self.label_scheme not in LABEL_SCHEMES:
            raise ValueError(f"data.label_scheme must be one of {LABEL_SCHEMES}, "
                             f"got {self.label_scheme!r}")


NerExperiment = experiment_class("NerExperiment", "ner", NerDataConfig,
                                 "A CoNLL-2003 NER fine-tuning run.")


class NerTask(FinetuningTask):
    """Fine-tunes a `BertTokenClassifier` on CoNLL-2003; scores entity-level F1."""

    config_class = NerExperiment
    name = "ner"
    kind = "token_classifier"
    main_metric_name = "f1"
    # Per-token labels move with their tokens; the tagger needs no extra input.
    packable = True
    sequence_outputs = ("logits",)
    sequence_labels = ("label_ids", "label_weights")

    def __init__(self, experiment):
        super().__init__(experiment)
        self._word_positions = {}

    def validate(self):
        if not self.data.train_file:
            raise ValueError("data.train_file is not set: give a CoNLL-2003 file "
                             "(eng.train), e.g. --set data.train_file=conll2003/eng.train")
        if not self.data.eval_files:
            raise ValueError("data.eval_files is not set: give the CoNLL-2003 evaluation "
                             "files, e.g. --set 'data.eval_files=[conll2003/eng.testa, "
                             "conll2003/eng.testb]'")
        super().validate()

    def _task_model(self, encoder):
        return BertTokenClassifier(encoder, num_labels=len(LABELS),
                                   dropout=self.model_config.head_dropout)

    # -- data ------------------------------------------------------------------

    @property
    def eval_sources(self):
        return tuple(self.data.eval_files)

    def _read_examples(self, source):
        """The sentences of a CoNLL file."""
        return conll2003.read_conll(self.data.train_file if source == "train" else source)

    def _make_table(self, source):
        sentences = self.examples(source)
        # The files' tags (IOB1 in CoNLL-2003) are trained as IOB2.
        tags = [conll_metrics.to_iob2(list(s.labels)) for s in sentences]
        features = conll2003.featurize(sentences, self.tokenizer, self.data.max_seq_length,
                                       tags, LABELS)
        self._word_positions[source] = features.word_positions
        return features.table

    def make_batch(self, table, indices):
        token_ids = tf.gather(table["token_ids"], indices)
        inputs = {"token_ids": token_ids, "segment_ids": tf.zeros_like(token_ids),
                  "padding_mask": tf.gather(table["padding_mask"], indices)}
        labels = {"label_ids": tf.gather(table["label_ids"], indices),
                  "label_weights": tf.gather(table["label_weights"], indices)}
        return self._finish_batch(inputs, labels)

    # -- loss and metrics ------------------------------------------------------

    def loss_count(self, labels):
        # The loss is a mean over the scored words of the global batch.
        return tf.reduce_sum(labels["label_weights"])

    def metric_sums(self, labels, outputs, inputs):
        logits = tf.cast(outputs["logits"], tf.float32)  # [B, S, K]
        weights = labels["label_weights"]
        losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels["label_ids"], logits)
        hits = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32),
                                labels["label_ids"]), tf.float32)
        return {"loss_sum": tf.reduce_sum(losses * weights),
                "correct": tf.reduce_sum(hits * weights), "count": tf.reduce_sum(weights),
                "tokens": self.token_count(inputs)}

    def word_labels(self, source, logits):
        """One predicted tag per word of every sentence of `source`, in `data.label_scheme`."""
        predicted = np.argmax(logits, axis=-1)  # [N, S]
        to_scheme = conll_metrics.to_iob1 if self.data.label_scheme == "iob1" else list
        result = []
        for i, positions in enumerate(self._word_positions[source]):
            tags = [LABELS[predicted[i, p]] if p >= 0 else OUTSIDE for p in positions]
            # The model's IOB2 tags, made valid (an I- after O starts a chunk)
            # and written in the files' scheme.
            result.append(to_scheme(conll_metrics.to_iob2(tags)))
        return result

    def evaluate_outputs(self, source, outputs, output_dir=None):
        sentences = self.examples(source)
        predicted = self.word_labels(source, outputs["logits"])
        scores = conll_metrics.evaluate([list(s.labels) for s in sentences], predicted)
        metrics = {key: scores[key] for key in ("f1", "precision", "recall", "accuracy")}
        if output_dir:
            self.write_predictions(source, predicted, output_dir)
            name = source_name(source)
            with storage.open(output_path(output_dir, f"metrics_{name}.json"), "w") as f:
                json.dump(scores, f, indent=2)
        return metrics

    def write_predictions(self, source, predicted, output_dir):
        """`word gold predicted` lines (conlleval's input) for the sentences of `source`."""
        name = source_name(source)
        path = output_path(output_dir, f"predictions_{name}.txt")
        conll2003.write_predictions(path, self.examples(source), predicted)
        return path

    def record_fields(self):
        return {"label_names": LABELS}
