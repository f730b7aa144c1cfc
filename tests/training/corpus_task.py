"""A task as small as a trainer test can be that still reads a text corpus as pretraining does.

"corpus_lines" classifies each document by whether its first sentence has
more than `LONG` words. Its input pipeline is bert_tf's corpus reader
(`bert_tf.data.corpus.document_dataset`: the files read in parallel, the text
checks) re-reading the files every epoch, batched and prefetched; the
words are hashed to ids of a one-layer encoder. Building and tracing it takes
a fraction of the pretraining task's time, so a test can start a trainer
twice (the fault, then the repaired run) in seconds.
"""

import dataclasses

import tensorflow as tf

from bert_tf import tasks
from bert_tf.checkpoints.task_record import TaskRecord
from bert_tf.data import corpus
from bert_tf.models import BertClassifier, BertEncoder
from bert_tf.models.encoder_config import EncoderConfig
from bert_tf.tasks.base import (
    Task,
    check_data_fits_encoder,
    encoder_config_differences,
    experiment_class,
)

SEQ = 8
VOCAB = 64
FIRST_WORD = 10  # ids below are [PAD], [unused*], [UNK], [CLS], [SEP], [MASK]
LONG = 12  # words of a "long" first sentence


def _encoder():
    return EncoderConfig(vocab_size=VOCAB, hidden_size=8, num_layers=1, num_heads=1,
                         intermediate_size=16, max_position_embeddings=SEQ)


@dataclasses.dataclass
class CorpusLinesModelConfig:
    encoder: EncoderConfig = dataclasses.field(default_factory=_encoder)


@dataclasses.dataclass
class CorpusLinesDataConfig:
    train_files: list = dataclasses.field(default_factory=list)
    eval_files: list = dataclasses.field(default_factory=list)
    vocab_file: str = ""
    lower_case: bool = True
    max_seq_length: int = SEQ


CorpusLinesExperiment = experiment_class(
    "CorpusLinesExperiment", "corpus_lines", CorpusLinesModelConfig, CorpusLinesDataConfig,
    "The corpus test task's experiment.")


def write_vocab(path):
    """A `VOCAB`-token vocabulary in BERT's layout at `path`."""
    words = (["[PAD]"] + [f"[unused{i}]" for i in range(5)] + ["[UNK]", "[CLS]", "[SEP]",
             "[MASK]"] + [f"word{i}" for i in range(VOCAB - FIRST_WORD)])
    path.write_text("\n".join(words) + "\n")
    return str(path)


class CorpusLinesTask(Task):
    """Is the first sentence of a document long? Corpus files in, one-layer encoder."""

    config_class = CorpusLinesExperiment
    name = "corpus_lines"
    sum_keys = ("loss_sum", "correct", "count", "tokens")

    def validate(self):
        self._tokenizer_contract = check_data_fits_encoder(self.experiment.data,
                                                           self.experiment.model.encoder)

    @property
    def vocab_file(self):
        return self.experiment.data.vocab_file

    def task_record(self):
        return TaskRecord(kind="classifier", name=self.name, max_seq_length=SEQ,
                          label_names=("short", "long"), text_inputs=1)

    def model_differences(self, old, new):
        return encoder_config_differences(old.encoder, new.encoder)

    def build_model(self, dtype=None):
        encoder = BertEncoder.from_encoder_config(self.experiment.model.encoder, dtype=dtype)
        return BertClassifier(encoder, num_classes=2)

    def initialize(self, model, path):
        raise ValueError("corpus_lines starts from scratch")

    @property
    def has_eval_data(self):
        return bool(self.experiment.data.eval_files)

    def _batches(self, files, batch_size):
        def example(document):
            words = tf.strings.split(document[0])
            ids = tf.strings.to_hash_bucket_fast(words[:SEQ], VOCAB - FIRST_WORD) + FIRST_WORD
            ids = tf.ensure_shape(tf.pad(tf.cast(ids, tf.int32), [[0, SEQ - tf.size(ids)]]),
                                  [SEQ])
            inputs = {"token_ids": ids, "segment_ids": tf.zeros_like(ids),
                      "padding_mask": tf.cast(ids > 0, tf.int32)}
            return inputs, {"label": tf.cast(tf.size(words) > LONG, tf.int32)}

        documents = corpus.document_dataset(files, cycle_length=2).repeat()
        # Two batches read ahead, as AUTOTUNE does on an idle machine (whatever the load).
        return documents.map(example).batch(batch_size, drop_remainder=True).prefetch(2)

    def train_dataset(self, input_context, global_batch_size):
        return self._batches(self.experiment.data.train_files, global_batch_size)

    def eval_dataset(self, input_context, global_batch_size):
        return self._batches(self.experiment.data.eval_files, global_batch_size)

    def loss_denominators(self, labels):
        return {"count": tf.cast(tf.shape(labels["label"])[0], tf.float32)}

    def compute_loss(self, labels, outputs, inputs, denominators):
        sums = self.metric_sums(labels, outputs, inputs)
        return sums["loss_sum"] / tf.maximum(denominators["count"], 1.0), sums

    def metric_sums(self, labels, outputs, inputs):
        logits = tf.cast(outputs["logits"], tf.float32)  # [B, 2]
        losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels["label"], logits)
        hits = tf.equal(tf.argmax(logits, -1, output_type=tf.int32), labels["label"])
        return {"loss_sum": tf.reduce_sum(losses),
                "correct": tf.reduce_sum(tf.cast(hits, tf.float32)),
                "count": tf.cast(tf.shape(logits)[0], tf.float32),
                "tokens": tf.reduce_sum(tf.cast(inputs["padding_mask"], tf.float32))}

    def metrics(self, sums):
        count = max(float(sums["count"]), 1e-9)
        return {"loss": float(sums["loss_sum"]) / count,
                "accuracy": float(sums["correct"]) / count}


def register(monkeypatch):
    """Registers `CorpusLinesTask` for the calling test only."""
    monkeypatch.setattr(tasks, "TASKS", tasks.TASKS.copy())
    tasks.register_task(CorpusLinesTask)
