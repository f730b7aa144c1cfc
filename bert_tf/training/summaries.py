"""TensorBoard event files for a run: `model_dir/train` and `model_dir/eval`.

Only the chief writes; other workers get no-op writers. A resumed run first
drops the events its killed predecessor wrote after the checkpoint it resumes
from, so every tag's steps stay strictly increasing across restarts.
"""

import glob
import logging
import os

import tensorflow as tf
from tensorboard.compat.proto import event_pb2


class SummaryWriters:
    """The train and eval writers of a run."""

    def __init__(self, model_dir, chief=True):
        self.train_dir = os.path.join(model_dir, "train")
        self.eval_dir = os.path.join(model_dir, "eval")
        if chief:
            self.train = tf.summary.create_file_writer(self.train_dir)
            self.eval = tf.summary.create_file_writer(self.eval_dir)
        else:
            self.train = self.eval = tf.summary.create_noop_writer()

    @staticmethod
    def scalars(writer, step, values):
        with writer.as_default(step=step):
            for name, value in values.items():
                tf.summary.scalar(name, value)
        writer.flush()

    def config_text(self, step, yaml_text):
        """The resolved config, shown in TensorBoard's Text tab."""
        with self.train.as_default(step=step):
            # Indented: TensorBoard renders text summaries as Markdown.
            tf.summary.text("config", "\n".join("    " + line for line in yaml_text.splitlines()))
        self.train.flush()

    def close(self):
        for writer in (self.train, self.eval):
            writer.close()


def event_files(model_dir):
    return sorted(glob.glob(os.path.join(model_dir, "*", "events.out.tfevents.*")))


def drop_events_after(model_dir, step):
    """Rewrites the run's event files without the events logged after `step`.

    Those came from a process that died before its next checkpoint; the
    resumed run logs those steps again.
    """
    for path in event_files(model_dir):
        events, dropped, truncated = [], 0, False
        records = iter(tf.data.TFRecordDataset(path))
        while True:
            try:
                record = next(records).numpy()
            except StopIteration:
                break
            except tf.errors.DataLossError:
                truncated = True  # the writer was killed mid-record
                break
            event = event_pb2.Event.FromString(record)
            if event.step > step and event.WhichOneof("what") == "summary":
                dropped += 1
            else:
                events.append(record)
        if dropped or truncated:
            with tf.io.TFRecordWriter(path + ".tmp") as writer:
                for record in events:
                    writer.write(record)
            os.replace(path + ".tmp", path)
            logging.info("dropped %d events after step %d from %s", dropped, step, path)
