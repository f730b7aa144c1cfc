"""TensorBoard event files for a run: `model_dir/train` and `model_dir/eval`.

Only the chief writes; other workers get no-op writers. A resumed run first
drops the events its killed predecessor wrote after the checkpoint it resumes
from, so every tag's steps stay strictly increasing across restarts.
"""

import logging
import os

import tensorflow as tf
from tensorboard.compat.proto import event_pb2

from bert_tf import storage

# TensorBoard lists tag groups alphabetically: losses and metrics come first.
_OPTIMIZER_METRICS = ("learning_rate", "gradient_norm", "loss_scale", "skipped_steps")
_THROUGHPUT_METRICS = ("examples_per_second", "tokens_per_second", "steps_per_second")


def summary_tag(name):
    """The grouped TensorBoard tag of a metric: `losses/`, `metrics/`, `optimizer/` or
    `throughput/` + its name. Train and eval write the same tag, so TensorBoard draws
    both runs of a metric on one chart."""
    if name == "loss" or name.endswith("_loss"):
        group = "losses"
    elif name in _OPTIMIZER_METRICS:
        group = "optimizer"
    elif name in _THROUGHPUT_METRICS:
        group = "throughput"
    else:
        group = "metrics"
    return f"{group}/{name}"


def metric_name(tag):
    """The metric a scalar tag holds: `summary_tag`'s group dropped (flat tags as they are)."""
    group, _, name = tag.partition("/")
    return name if name and group in _GROUPS else tag


_GROUPS = ("losses", "metrics", "optimizer", "throughput")


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
                tf.summary.scalar(summary_tag(name), value)
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


def read_scalars(event_dir):
    """{metric: [(step, value), ...]} read back from the TensorBoard event files in `event_dir`.

    Args:
      event_dir: a run's `train/` or `eval/` folder (missing: an empty result).

    Returns:
      Every numeric scalar by metric name (`mlm_accuracy`, not its TensorBoard
      tag `metrics/mlm_accuracy`), with its points sorted by step; a step
      logged twice (a resumed run) keeps its last value.
    """
    series = {}
    for path in sorted(storage.glob(os.path.join(event_dir, "events.out.tfevents.*"))):
        for record in tf.data.TFRecordDataset(path):
            event = event_pb2.Event.FromString(record.numpy())
            for value in event.summary.value:
                if value.HasField("simple_value"):
                    number = value.simple_value
                elif value.HasField("tensor") and value.tensor.dtype != tf.string.as_datatype_enum:
                    number = float(tf.make_ndarray(value.tensor))
                else:
                    continue
                series.setdefault(metric_name(value.tag), {})[int(event.step)] = number
    return {tag: sorted(points.items()) for tag, points in series.items()}


def event_files(model_dir):
    return sorted(storage.glob(os.path.join(model_dir, "*", "events.out.tfevents.*")))


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
            # Object storage: the file is rewritten under its name once (the events are in
            # memory), as a rename there would be a second copy.
            target = path if storage.has_scheme(path) else path + ".tmp"
            with tf.io.TFRecordWriter(target) as writer:
                for record in events:
                    writer.write(record)
            if target != path:
                storage.rename(target, path)
            logging.info("dropped %d events after step %d from %s", dropped, step, path)
