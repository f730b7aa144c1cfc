"""SQuAD v1.1 / v2.0: extractive question answering with a span head.

`[CLS] question [SEP] context window [SEP]` goes through the encoder; the
span head scores every token as the answer's start and end. Long contexts
become several windows (`doc_stride`); evaluation picks the best span over
all windows of a question (n-best post-processing, BERT's recipe) and
scores it with the official EM/F1. For v2.0 the [CLS] position is the
"no answer" span.

Shapes: F windows, S sequence length.
"""

import dataclasses
import json

import numpy as np
import tensorflow as tf

from bert_tf import storage
from bert_tf.data import squad_reader, squad_windows
from bert_tf.models.bert_span_labeler import BertSpanLabeler
from bert_tf.tasks import squad_metrics, squad_postprocess
from bert_tf.tasks.finetuning import (
    FinetuningDataConfig,
    FinetuningTask,
    experiment_class,
    output_path,
    source_name,
)

ARTICLE_SELECTIONS = ("all", "even", "odd")


@dataclasses.dataclass
class SquadDataConfig(FinetuningDataConfig):
    """SQuAD files and BERT's feature and post-processing options."""

    train_file: str = ""
    eval_file: str = ""
    # Which articles (by index in the file's `data` list) to use: "all",
    # "even" or "odd" (training and evaluating on halves of one file).
    train_articles: str = "all"
    eval_articles: str = "all"
    max_seq_length: int = 384
    doc_stride: int = 128
    max_query_length: int = 64
    n_best_size: int = 20
    max_answer_length: int = 30
    version_2_with_negative: bool = False
    # v2.0: answer "" when null score - best span score exceeds this.
    null_score_diff_threshold: float = 0.0

    def __post_init__(self):
        for key in ("train_articles", "eval_articles"):
            if getattr(self, key) not in ARTICLE_SELECTIONS:
                raise ValueError(f"data.{key} must be one of {ARTICLE_SELECTIONS}, "
                                 f"got {getattr(self, key)!r}")


SquadExperiment = experiment_class("SquadExperiment", "squad", SquadDataConfig,
                                   "A SQuAD fine-tuning run.")


def _article_filter(selection):
    return {"all": lambda i: True, "even": lambda i: i % 2 == 0,
            "odd": lambda i: i % 2 == 1}[selection]


class SquadTask(FinetuningTask):
    """Fine-tunes a `BertSpanLabeler` on SQuAD; scores EM and F1 (official semantics)."""

    config_class = SquadExperiment
    name = "squad"
    kind = "span_labeler"
    main_metric_name = "f1"
    sequence_outputs = ("start_logits", "end_logits")

    def __init__(self, experiment):
        super().__init__(experiment)
        self._features = {}

    def validate(self):
        for key in ("train_file", "eval_file"):
            if not getattr(self.data, key):
                raise ValueError(f"data.{key} is not set: give a SQuAD JSON file "
                                 "(train-v1.1.json / dev-v1.1.json, or the v2.0 ones)")
        super().validate()

    def _task_model(self, encoder):
        return BertSpanLabeler(encoder)

    def in_percent(self, metric):
        """EM and F1 (plain, HasAns_, NoAns_, best_): percent, as the official scripts give."""
        return metric.endswith(("exact_match", "exact", "f1"))

    # -- data ------------------------------------------------------------------

    @property
    def eval_sources(self):
        return (self.data.eval_file,)

    def _read_examples(self, source):
        training = source == "train"
        path = self.data.train_file if training else source
        selection = self.data.train_articles if training else (
            self.data.eval_articles if source == self.data.eval_file else "all")
        if selection == "all":
            examples, _ = squad_reader.read_squad(path)
        else:
            examples = squad_reader.split_by_article(path, _article_filter(selection))
        if training and not self.data.version_2_with_negative:
            # Unanswerable questions carry no span to learn in v1.1.
            examples = [e for e in examples if not e.is_impossible]
        return examples

    def features(self, source):
        """The windows of `source`'s examples (`squad_windows.SquadFeatures`), cached."""
        if source not in self._features:
            data = self.data
            self._features[source] = squad_windows.create_features(
                self.examples(source), self.tokenizer, max_seq_length=data.max_seq_length,
                doc_stride=data.doc_stride, max_query_length=data.max_query_length)
        return self._features[source]

    def _make_table(self, source):
        features = self.features(source)
        return {"index": np.arange(len(features), dtype=np.int64),
                "token_ids": features.token_ids, "segment_ids": features.segment_ids,
                "padding_mask": features.padding_mask,
                "start_positions": features.start_positions,
                "end_positions": features.end_positions}

    def make_batch(self, table, indices):
        inputs = {key: tf.gather(table[key], indices)
                  for key in ("token_ids", "segment_ids", "padding_mask")}
        labels = {key: tf.gather(table[key], indices)
                  for key in ("start_positions", "end_positions")}
        return self._finish_batch(inputs, labels)

    # -- loss and metrics ------------------------------------------------------

    def metric_sums(self, labels, outputs, inputs):
        sums = {"loss_sum": 0.0, "correct": 1.0}
        for side in ("start", "end"):
            logits = tf.cast(outputs[f"{side}_logits"], tf.float32)  # [B, S]
            gold = labels[f"{side}_positions"]
            # BERT's loss: the mean of the start and end cross-entropies.
            sums["loss_sum"] += tf.reduce_sum(
                tf.nn.sparse_softmax_cross_entropy_with_logits(gold, logits)) / 2.0
            # "Accuracy": both ends of the labelled span found.
            sums["correct"] *= tf.cast(
                tf.equal(tf.argmax(logits, -1, output_type=tf.int32), gold), tf.float32)
        sums["correct"] = tf.reduce_sum(sums["correct"])
        sums["count"] = self.example_count(labels, "start_positions")
        sums["tokens"] = self.token_count(inputs)
        return sums

    def answers(self, source, outputs):
        """(predictions, n-best lists, null odds) for every question of `source`."""
        data = self.data
        return squad_postprocess.predict_answers(
            self.examples(source), self.features(source), outputs["start_logits"],
            outputs["end_logits"], n_best_size=data.n_best_size,
            max_answer_length=data.max_answer_length,
            version_2_with_negative=data.version_2_with_negative,
            null_score_diff_threshold=data.null_score_diff_threshold)

    def check_sources(self, sources, output_dir=None):
        """As every fine-tuning task's, and one file per `output_dir`: SQuAD's
        `predictions.json` (the official scorer's input) has a fixed name."""
        super().check_sources(sources, output_dir)
        if output_dir and len(sources) > 1:
            raise ValueError(f"SQuAD predictions go to {output_dir}/predictions.json, one "
                             f"file per output directory; write the {len(sources)} files' "
                             "predictions to separate directories")

    def evaluate_outputs(self, source, outputs, output_dir=None):
        predictions, nbest, null_odds = self.answers(source, outputs)
        examples = self.examples(source)
        scores = {}
        if any(e.answers or e.is_impossible for e in examples):
            scores = squad_metrics.evaluate(examples, predictions,
                                            null_odds or None)
        if output_dir:
            squad_postprocess.write_predictions(output_dir, predictions, nbest, null_odds)
            with storage.open(output_path(output_dir, f"metrics_{source_name(source)}.json"),
                      "w") as f:
                json.dump(scores, f, indent=2)
        return {key: float(value) for key, value in scores.items()
                if isinstance(value, (int, float)) and not isinstance(value, bool)}

    def record_fields(self):
        data = self.data
        return {"version_2_with_negative": data.version_2_with_negative,
                "max_answer_length": data.max_answer_length,
                "max_query_length": data.max_query_length}
