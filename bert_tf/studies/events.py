"""Scalars read back from a run's TensorBoard event files (for reports and the demo's summary)."""

import glob
import os


def read_scalars(event_dir):
    """{tag: [(step, value), ...]} from the TensorBoard event files in `event_dir`.

    Args:
      event_dir: a run's `train/` or `eval/` folder (missing: an empty result).

    Returns:
      Every numeric scalar by metric name (`mlm_accuracy`, not its TensorBoard
      tag `metrics/mlm_accuracy`), with its points sorted by step; a step
      logged twice (a resumed run) keeps its last value.
    """
    import tensorflow as tf
    from tensorboard.compat.proto import event_pb2

    from bert_tf.training.summaries import metric_name

    series = {}
    for path in sorted(glob.glob(os.path.join(event_dir, "events.out.tfevents.*"))):
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
