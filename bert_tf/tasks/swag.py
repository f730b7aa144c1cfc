"""SWAG: pick the right ending among four (multiple choice).

As in the BERT paper (section 4.4): each example becomes four sequences
`[CLS] context [SEP] start_phrase ending_i [SEP]`; a dense layer on each
pooled output gives one score, and a softmax over the four is trained with
cross-entropy. Tokenization and packing run in the input pipeline.

Shapes: B examples, C choices (4), S sequence length.
"""

import dataclasses
import json

import numpy as np
import tensorflow as tf

from bert_tf import storage
from bert_tf.data import swag as swag_data
from bert_tf.models.bert_multiple_choice import BertMultipleChoice
from bert_tf.tasks.finetuning import (
    FinetuningDataConfig,
    FinetuningTask,
    experiment_class,
    output_path,
    source_name,
)

NUM_CHOICES = 4


@dataclasses.dataclass
class SwagDataConfig(FinetuningDataConfig):
    """SWAG files: the official CSVs (train.csv, val.csv) or JSON lines."""

    train_file: str = ""
    eval_file: str = ""


SwagExperiment = experiment_class("SwagExperiment", "swag", SwagDataConfig,
                                  "A SWAG fine-tuning run.")


class SwagTask(FinetuningTask):
    """Fine-tunes a `BertMultipleChoice` on SWAG; scores accuracy."""

    config_class = SwagExperiment
    name = "swag"
    kind = "multiple_choice"

    def validate(self):
        for key in ("train_file", "eval_file"):
            if not getattr(self.data, key):
                raise ValueError(f"data.{key} is not set: give SWAG's official CSV "
                                 "(train.csv / val.csv) or a JSON-lines file")
        super().validate()

    def _task_model(self, encoder):
        return BertMultipleChoice(encoder, num_choices=NUM_CHOICES,
                                  dropout=self.model_config.head_dropout)

    # -- data ------------------------------------------------------------------

    @property
    def eval_sources(self):
        return (self.data.eval_file,)

    def _read_examples(self, source):
        return swag_data.read_swag(self.data.train_file if source == "train" else source)

    def _make_table(self, source):
        examples = self.examples(source)
        endings = [[f"{e.start_phrase} {ending}".strip() for ending in e.endings]
                   for e in examples]
        return {
            "index": np.arange(len(examples), dtype=np.int64),
            "context": np.array([e.context for e in examples], dtype=object),
            "endings": np.array(endings, dtype=object).reshape(len(examples), NUM_CHOICES),
            # Unlabelled (test) examples get label 0; their accuracy is not reported.
            "label": np.array([0 if e.label is None else e.label for e in examples], np.int32),
        }

    def make_batch(self, table, indices):
        contexts = tf.repeat(tf.gather(table["context"], indices), NUM_CHOICES)  # [B * C]
        endings = tf.reshape(tf.gather(table["endings"], indices), [-1])  # [B * C]
        packed = self.packer()([self.tokenizer.tokenize(contexts),
                                self.tokenizer.tokenize(endings)])
        length = self.data.max_seq_length
        # [B * C, S] -> [B, C, S]: the model scores the choices of an example together.
        inputs = {key: tf.reshape(value, [-1, NUM_CHOICES, length])
                  for key, value in packed.items()}
        return self._finish_batch(inputs, {"label": tf.gather(table["label"], indices)})

    # -- loss and metrics ------------------------------------------------------

    def metric_sums(self, labels, outputs, inputs):
        logits = tf.cast(outputs["logits"], tf.float32)  # [B, C]
        losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels["label"], logits)
        hits = tf.equal(tf.argmax(logits, -1, output_type=tf.int32), labels["label"])
        return {"loss_sum": tf.reduce_sum(losses),
                "correct": tf.reduce_sum(tf.cast(hits, tf.float32)),
                "count": self.example_count(labels, "label"), "tokens": self.token_count(inputs)}

    def evaluate_outputs(self, source, outputs, output_dir=None):
        examples = self.examples(source)
        predicted = np.argmax(outputs["logits"], axis=-1)
        labelled = [i for i, e in enumerate(examples) if e.label is not None]
        metrics = {}
        if labelled:
            gold = np.array([examples[i].label for i in labelled])
            metrics["accuracy"] = float(np.mean(predicted[labelled] == gold))
        if output_dir:
            self.write_predictions(source, outputs["logits"], output_dir)
            name = source_name(source)
            with storage.open(output_path(output_dir, f"metrics_{name}.json"), "w") as f:
                json.dump(metrics, f, indent=2)
        return metrics

    def write_predictions(self, source, logits, output_dir):
        """`predictions_<file>.jsonl`: id, predicted ending and the four probabilities."""
        probabilities = tf.nn.softmax(logits, axis=-1).numpy()
        path = output_path(output_dir, f"predictions_{source_name(source)}.jsonl")
        with storage.atomic_write(path, encoding="utf-8") as f:
            for example, row in zip(self.examples(source), probabilities):
                f.write(json.dumps({"example_id": example.example_id,
                                    "prediction": int(np.argmax(row)),
                                    "probabilities": [round(float(p), 6) for p in row]}) + "\n")
        return path

    def record_fields(self):
        return {"num_choices": NUM_CHOICES}
