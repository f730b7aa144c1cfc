"""The task info an export is built from: read from a model directory, checked
against the model it describes."""

from bert_tf.checkpoints import native

# BERT run_squad.py defaults, for directories written before task info existed.
_SQUAD_DEFAULTS = {"version_2_with_negative": False, "max_answer_length": 30,
                   "max_query_length": 64}


def infer_task_info(metadata, max_seq_length, source):
    """Task info for a directory without "task": kind from `model_class`.

    Label names default to "0", "1", ...; classifiers take one text.
    """
    if max_seq_length is None:
        raise ValueError(
            f"{source} has no 'task' record (written before task info existed): "
            "pass --max_seq_length")
    task_args = metadata.get("task_args") or {}
    kind = native.kind_of_model(metadata.get("model_class"), task_args)
    info = {"name": kind, "kind": kind, "max_seq_length": max_seq_length}
    if kind == "classifier":
        info.update(label_names=[str(i) for i in range(task_args["num_classes"])],
                    text_inputs=1)
    elif kind == "regressor":
        info["text_inputs"] = 1
    elif kind == "token_classifier":
        info["label_names"] = [str(i) for i in range(task_args["num_labels"])]
    elif kind == "span_labeler":
        info.update(_SQUAD_DEFAULTS)
    elif kind == "multiple_choice":
        info["num_choices"] = task_args["num_choices"]
    return info


def resolve_task_info(metadata, max_seq_length=None, source="bert_tf_model.json"):
    """The checked task info of a model directory's metadata.

    Args:
      metadata: the `bert_tf_model.json` dict.
      max_seq_length: overrides the recorded length (required without "task").
      source: names the file in errors.

    Raises:
      ValueError: naming the key that is missing or does not fit the model.
    """
    if "task" in metadata:
        info = dict(metadata["task"])
        if max_seq_length is not None:
            info["max_seq_length"] = max_seq_length
    else:
        info = infer_task_info(metadata, max_seq_length, source)
    info = native.validate_task_info(info, f"{source} 'task'")
    check_fits_model(info, metadata, source)
    return info


def check_fits_model(info, metadata, source):
    """Raises ValueError when the task info contradicts the model's shape."""
    task_args = metadata.get("task_args") or {}
    model_kind = native.kind_of_model(metadata.get("model_class"), task_args)
    if info["kind"] != model_kind:
        raise ValueError(
            f"{source}: task kind {info['kind']!r} does not fit model_class "
            f"{metadata.get('model_class')} (a {model_kind})")
    sizes = {"classifier": "num_classes", "token_classifier": "num_labels"}
    if info["kind"] in sizes:
        expected = task_args.get(sizes[info["kind"]])
        if len(info["label_names"]) != expected:
            raise ValueError(
                f"{source}: 'label_names' has {len(info['label_names'])} names but the "
                f"model has {sizes[info['kind']]}={expected}")
    if info["kind"] == "multiple_choice" and info["num_choices"] != task_args.get("num_choices"):
        raise ValueError(
            f"{source}: 'num_choices' is {info['num_choices']} but the model was built "
            f"with num_choices={task_args.get('num_choices')}")
    positions = (metadata.get("encoder_config") or {}).get("max_position_embeddings")
    if positions is not None and info["max_seq_length"] > positions:
        raise ValueError(
            f"{source}: max_seq_length {info['max_seq_length']} exceeds the model's "
            f"max_position_embeddings {positions}")
    if info["kind"] == "span_labeler" and info["max_seq_length"] < info["max_query_length"] + 4:
        raise ValueError(
            f"{source}: max_seq_length {info['max_seq_length']} leaves no room for a "
            f"context after max_query_length {info['max_query_length']}")
