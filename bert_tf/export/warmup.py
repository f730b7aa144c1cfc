"""`assets.extra/tf_serving_warmup_requests`: TF Serving's warm-up file.

A TFRecord file of `PredictionLog` protos; the model server replays them
when it loads the version, so the first client request does not pay for
graph initialisation.
"""

import os

import tensorflow as tf

WARMUP_FILE = "tf_serving_warmup_requests"

_SENTENCES = ("the film is a delight from start to finish .",
              "A dull, lifeless remake that never finds its footing.")
_CONTEXT = "The Eiffel Tower was completed in 1889 and stands in Paris, France."


def sample_inputs(task_info):
    """Representative `serving_default` inputs for a task: {name: list}."""
    kind = task_info["kind"]
    if kind == "span_labeler":
        return {"question": ["Where is the Eiffel Tower?", "When was it completed?"],
                "context": [_CONTEXT, _CONTEXT]}
    if kind == "multiple_choice":
        choices = [f"choice {i} of the ending ." for i in range(task_info["num_choices"])]
        return {"context": [_SENTENCES[0]], "choices": [choices]}
    if kind in ("classifier", "regressor") and task_info.get("text_inputs", 1) == 2:
        return {"text": list(_SENTENCES), "text_pair": list(reversed(_SENTENCES))}
    return {"text": list(_SENTENCES)}


def write_warmup_requests(saved_model_dir, model_name, task_info, batch_sizes=(1, 2)):
    """Writes one request per batch size for `serving_default`; returns the path."""
    # Imported here: only exporting needs the serving protos.
    from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

    inputs = sample_inputs(task_info)
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
