"""`assets.extra/tf_serving_warmup_requests`: TF Serving's warm-up file.

A TFRecord file of `PredictionLog` protos; the model server replays them
when it loads the version, so the first client request does not pay for
graph initialisation. The requests' inputs come from the record's serving
kind (`kinds.ServingKind.sample_inputs`). Text requests run at their longest
text (rounded up to 8), so each batch size is sent twice: with the short
samples and with every text long enough to fill `max_seq_length`, the two
ends of the lengths TF Serving will see.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import tensorflow as tf

from bert_tf import storage
from bert_tf.checkpoints.task_record import TaskRecord
from bert_tf.export import kinds

WARMUP_FILE = "tf_serving_warmup_requests"


def write_warmup_requests(saved_model_dir: str, model_name: str, record: TaskRecord,
                          batch_sizes: Sequence[int] = (1, 2)) -> str:
    """Writes two requests per batch size (short, full length) for `serving_default`.

    Returns the path of the file.

    Args:
      saved_model_dir: the export version directory being written.
      model_name: the model name TF Serving serves it under (the export base's name).
      record: the export's `TaskRecord`; its kind supplies the sample inputs.
      batch_sizes: the batch sizes of the requests.
    """
    # Imported here: only exporting needs the serving protos.
    from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

    short = kinds.serving_kind(record.kind).sample_inputs(record)
    requests = [(short, batch_size) for batch_size in batch_sizes]
    requests += [(_full_length(short, record.max_seq_length), batch_size)
                 for batch_size in batch_sizes]
    directory = os.path.join(saved_model_dir, "assets.extra")
    storage.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, WARMUP_FILE)
    with tf.io.TFRecordWriter(path) as writer:
        for inputs, batch_size in requests:
            request = predict_pb2.PredictRequest(
                model_spec=model_pb2.ModelSpec(name=model_name,
                                               signature_name="serving_default"))
            for key, values in inputs.items():
                rows = (values * batch_size)[:batch_size]
                request.inputs[key].CopyFrom(tf.make_tensor_proto(rows, dtype=tf.string))
            log = prediction_log_pb2.PredictionLog(
                predict_log=prediction_log_pb2.PredictLog(request=request))
            writer.write(log.SerializeToString())
    return path


def _full_length(inputs, max_seq_length):
    """`inputs` with every text repeated to at least `max_seq_length` words."""
    def lengthen(value):
        if isinstance(value, list):
            return [lengthen(item) for item in value]
        words = value.split()
        return " ".join((words * (max_seq_length // len(words) + 1))[:max_seq_length])

    return {key: lengthen(values) for key, values in inputs.items()}
