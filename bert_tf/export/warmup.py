"""`assets.extra/tf_serving_warmup_requests`: TF Serving's warm-up file.

A TFRecord file of `PredictionLog` protos; the model server replays them
when it loads the version, so the first client request does not pay for
graph initialisation. The requests' inputs come from the record's serving
kind (`kinds.ServingKind.sample_inputs`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import tensorflow as tf

from bert_tf.checkpoints.task_record import TaskRecord
from bert_tf.export import kinds

WARMUP_FILE = "tf_serving_warmup_requests"


def write_warmup_requests(saved_model_dir: str, model_name: str, record: TaskRecord,
                          batch_sizes: Sequence[int] = (1, 2)) -> str:
    """Writes one request per batch size for `serving_default`; returns the path.

    Args:
      saved_model_dir: the export version directory being written.
      model_name: the model name TF Serving serves it under (the export base's name).
      record: the export's `TaskRecord`; its kind supplies the sample inputs.
      batch_sizes: one request of each batch size.
    """
    # Imported here: only exporting needs the serving protos.
    from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

    inputs = kinds.serving_kind(record.kind).sample_inputs(record)
    directory = os.path.join(saved_model_dir, "assets.extra")
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, WARMUP_FILE)
    with tf.io.TFRecordWriter(path) as writer:
        for batch_size in batch_sizes:
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
