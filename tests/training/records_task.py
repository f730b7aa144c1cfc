"""`corpus_task`'s twin that reads BERT pretraining TFRecords, for trainer tests of shards.

"record_labels" predicts each record's `next_sentence_labels` from its
`input_ids` with the one-layer encoder of `corpus_task`. Its input pipeline is
bert_tf's TFRecord reader (`bert_tf.data.records.read_pretraining_records`:
the framing checked when the pipeline is built, every record's checksum and
each file's record count checked while reading), re-reading the shards
forever, so a shard damaged mid-run is met again within an epoch.
"""

from corpus_task import CorpusLinesDataConfig, CorpusLinesModelConfig, CorpusLinesTask

from bert_tf import tasks
from bert_tf.data import records
from bert_tf.tasks.base import experiment_class

SEQ = 8

RecordLabelsExperiment = experiment_class(
    "RecordLabelsExperiment", "record_labels", CorpusLinesModelConfig, CorpusLinesDataConfig,
    "The TFRecord test task's experiment.")


def write_shard(path, count=24):
    """`count` pretraining records of length `SEQ` at `path` (a `pathlib.Path`); returns it."""
    with records.PretrainingRecordWriter([str(path)]) as writer:
        for index in range(count):
            writer.write({"input_ids": [7 + index % 50] + [10 + index % 40] * (SEQ - 1),
                          "input_mask": [1] * SEQ, "segment_ids": [0] * SEQ,
                          "masked_lm_positions": [1, 2], "masked_lm_ids": [3, 4],
                          "masked_lm_weights": [1.0, 1.0],
                          "next_sentence_labels": [index % 2]})
    return path


class RecordLabelsTask(CorpusLinesTask):
    """Each record's NSP label from its token ids: TFRecord shards in, one-layer encoder."""

    config_class = RecordLabelsExperiment
    name = "record_labels"

    def _batches(self, files, batch_size):
        def example(features):
            inputs = {"token_ids": features["input_ids"],
                      "segment_ids": features["segment_ids"],
                      "padding_mask": features["input_mask"]}
            return inputs, {"label": features["next_sentence_labels"]}

        dataset = records.read_pretraining_records(files, batch_size=batch_size,
                                                   num_epochs=None, cycle_length=2)
        return dataset.map(example)


def register(monkeypatch):
    """Registers `RecordLabelsTask` for the calling test only."""
    monkeypatch.setattr(tasks, "TASKS", tasks.TASKS.copy())
    tasks.register_task(RecordLabelsTask)
