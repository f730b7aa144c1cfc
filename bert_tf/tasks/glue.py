"""GLUE: sentence and sentence-pair classification (and STS-B regression).

`[CLS] text_a [SEP] (text_b [SEP])` goes through the encoder; a dense layer
on the pooled output gives the class logits (or one score for STS-B).
Tokenization and packing run in the input pipeline, in graph.
"""

import dataclasses
import json

import numpy as np
import tensorflow as tf

from bert_tf import storage
from bert_tf.data import glue as glue_data
from bert_tf.models.bert_classifier import BertClassifier
from bert_tf.tasks import glue_metrics, row_packing
from bert_tf.tasks.finetuning import (
    FinetuningDataConfig,
    FinetuningTask,
    experiment_class,
    output_path,
)


@dataclasses.dataclass
class GlueDataConfig(FinetuningDataConfig):
    """Which GLUE task, and where its TSV files are."""

    # One of bert_tf.data.glue.GLUE_TASKS, e.g. "sst2", "mrpc", "stsb".
    task_name: str = "sst2"
    # Required: the folder holding the task folders (SST-2/, MRPC/, ...).
    data_dir: str = ""


GlueExperiment = experiment_class("GlueExperiment", "glue", GlueDataConfig,
                                  "A GLUE fine-tuning run: one YAML file in configs/finetune/.")


def _example_weights(labels):
    """1.0 per example ([B]), or per slot of packed rows ([B, K], 0.0 for empty slots)."""
    if "slot_weights" in labels:
        return labels["slot_weights"]
    return tf.ones_like(labels["label"], tf.float32)


class GlueTask(FinetuningTask):
    """Fine-tunes a `BertClassifier` on one GLUE task; scores with the task's official metric."""

    config_class = GlueExperiment
    name = "glue"
    packable = True
    packed_model_inputs = ("cls_positions",)

    @property
    def spec(self):
        return glue_data.task_spec(self.data.task_name)

    @property
    def kind(self):
        return "regressor" if self.spec.is_regression else "classifier"

    @property
    def data_dir(self):
        return self.data.data_dir

    def validate(self):
        glue_data.task_spec(self.data.task_name)  # an unknown name fails here, listing all
        if not self.data.data_dir:
            raise ValueError("data.data_dir is not set: give the folder holding the GLUE "
                             "task folders (SST-2/, MRPC/, ...), e.g. "
                             "--set data.data_dir=glue_data")
        super().validate()

    def _task_model(self, encoder):
        spec = self.spec
        num_classes = 1 if spec.is_regression else len(spec.label_names)
        return BertClassifier(encoder, num_classes=num_classes,
                              dropout=self.model_config.head_dropout,
                              packed=row_packing.is_packed(self.data))

    # -- data ------------------------------------------------------------------

    @property
    def eval_sources(self):
        return self.spec.eval_splits

    @property
    def main_metric_name(self):
        return self.spec.metric_names[0]

    # -- evaluate / predict ----------------------------------------------------

    # `--split dev`: GLUE names its sources by split.
    source_type = "split"

    @property
    def prediction_sources(self):
        return self.spec.test_splits

    def check_sources(self, sources, output_dir=None):
        """Each split is one of the task's and its file exists; an unlabelled
        (test) split needs `output_dir`, as predictions are all it gives.

        Args:
          sources: split names; empty: `eval_sources`.
          output_dir: where prediction files would go; None: metrics only.
        """
        spec = self.spec
        for split in sources or self.eval_sources:
            # Raises for a split the task does not have, listing its splits.
            path = glue_data.split_path(spec.name, split, self.data_dir)
            if not storage.isfile(path):
                raise FileNotFoundError(f"no {split} file for GLUE task {spec.name!r}: "
                                        f"{path} does not exist")
            if split in spec.test_splits and not output_dir:
                raise ValueError(f"the {split} split of {spec.name!r} has no labels, so it "
                                 "has no metrics: only its prediction file can be written; "
                                 "give an output directory (--output_dir)")

    def _read_examples(self, split):
        return glue_data.read_examples(self.data.task_name, split, self.data_dir)

    def _make_table(self, split):
        spec = self.spec
        examples = self.examples(split)
        with_labels = split not in spec.test_splits
        table = {
            "index": np.arange(len(examples), dtype=np.int64),
            "text_a": np.array([e.text_a for e in examples], dtype=object),
        }
        if spec.is_pair:
            table["text_b"] = np.array([e.text_b or "" for e in examples], dtype=object)
        if with_labels:
            ids = glue_data.label_ids(self.data.task_name, examples)
            table["label"] = np.asarray(ids, np.float32 if spec.is_regression else np.int32)
        else:
            table["label"] = np.zeros(len(examples), np.float32 if spec.is_regression else np.int32)
        return table

    def make_batch(self, table, indices):
        segments = [self.tokenizer.tokenize(tf.gather(table["text_a"], indices))]
        if "text_b" in table:
            segments.append(self.tokenizer.tokenize(tf.gather(table["text_b"], indices)))
        inputs = self.packer()(segments)
        labels = {"label": tf.gather(table["label"], indices)}
        return self._finish_batch(inputs, labels)

    # -- loss and metrics ------------------------------------------------------

    def loss_count(self, labels):
        return tf.reduce_sum(_example_weights(labels))

    def metric_sums(self, labels, outputs, inputs):
        # [B, classes] and labels [B]; packed rows: [B, K, classes] and [B, K].
        logits = tf.cast(outputs["logits"], tf.float32)
        weights = _example_weights(labels)
        if self.spec.is_regression:
            score = logits[..., 0]
            losses = tf.square(score - labels["label"])
            # "Accuracy" of a regressor: within 0.5 of the gold score.
            hits = tf.cast(tf.abs(score - labels["label"]) <= 0.5, tf.float32)
        else:
            losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels["label"], logits)
            hits = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32),
                                    labels["label"]), tf.float32)
        return {"loss_sum": tf.reduce_sum(losses * weights),
                "correct": tf.reduce_sum(hits * weights), "count": tf.reduce_sum(weights),
                "tokens": self.token_count(inputs)}

    def predictions(self, outputs):
        """Label ids (or scores for STS-B) from the model's logits."""
        logits = outputs["logits"]
        # A packed model gives [N, 1, classes] for one example per row.
        logits = logits.reshape(-1, logits.shape[-1])
        return logits[:, 0] if self.spec.is_regression else np.argmax(logits, axis=-1)

    def evaluate_outputs(self, source, outputs, output_dir=None):
        predictions = self.predictions(outputs)
        table = self._table(source)
        if source in self.spec.test_splits:
            metrics = {}
        else:
            metrics = glue_metrics.compute(self.data.task_name, table["label"], predictions)
        if output_dir:
            self.write_predictions(source, predictions, output_dir)
            with storage.open(output_path(output_dir, f"metrics_{source}.json"), "w") as f:
                json.dump(metrics, f, indent=2)
        return metrics

    def write_predictions(self, source, predictions, output_dir):
        """Writes the predictions of the split `source` into `output_dir`; returns the path.

        A test split gets the leaderboard's submission file (`SST-2.tsv`,
        `MNLI-m.tsv`, ...). A labelled split (dev, MNLI's dev_matched, train)
        gets `<TASK>_<split>_predictions.tsv` (`MRPC_dev_predictions.tsv`),
        to read next to its metrics: a header `index prediction label`, then
        per example its id, the predicted label name (STS-B: the score the
        metric was computed on, unclipped) and the gold label.

        Args:
          source: a split of the task.
          predictions: one label id (STS-B: one score) per example of `source`.
          output_dir: created when missing.
        """
        spec, examples = self.spec, self.examples(source)
        if source in spec.test_splits:
            return glue_data.write_submission(self.data.task_name, source, examples,
                                              list(predictions), output_dir)
        if len(predictions) != len(examples):
            raise ValueError(f"got {len(predictions)} predictions for the "
                             f"{len(examples)} examples of {source!r}")
        lines = ["index\tprediction\tlabel\n"]
        for example, prediction in zip(examples, predictions):
            if spec.is_regression:
                # 9 significant digits give back the float32 score exactly, so
                # the file reproduces the metric even for nearly equal scores.
                predicted, gold = f"{float(prediction):.9g}", f"{example.label:.3f}"
            else:
                predicted, gold = spec.label_names[int(prediction)], example.label
            lines.append(f"{example.guid}\t{predicted}\t{gold}\n")
        path = output_path(output_dir, f"{spec.directory}_{source}_predictions.tsv")
        # Written aside and renamed: an interrupted run leaves no half file.
        with storage.atomic_write(path, encoding="utf-8", newline="") as f:
            f.writelines(lines)
        return path

    def record_fields(self):
        spec = self.spec
        fields = {"dataset": spec.name, "text_inputs": 2 if spec.is_pair else 1}
        if not spec.is_regression:
            fields["label_names"] = spec.label_names
        return fields
