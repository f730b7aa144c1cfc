"""Lists the ops of a SavedModel, its function library included."""

import os

from tensorflow.core.protobuf import saved_model_pb2

from bert_tf import storage


def read_saved_model_proto(saved_model_dir):
    """The `SavedModel` proto of `saved_model_dir/saved_model.pb`."""
    path = os.path.join(saved_model_dir, "saved_model.pb")
    if not storage.isfile(path):
        raise FileNotFoundError(f"{path} not found: not a SavedModel directory")
    with storage.open(path, "rb") as f:
        return saved_model_pb2.SavedModel.FromString(f.read())


def graph_def_ops(graph_def):
    """{op name: count} over a GraphDef's nodes and every library function."""
    counts = {}
    nodes = list(graph_def.node)
    for function in graph_def.library.function:
        nodes.extend(function.node_def)
    for node in nodes:
        counts[node.op] = counts.get(node.op, 0) + 1
    return counts


def saved_model_ops(saved_model_dir):
    """{op name: count} over every meta graph of a SavedModel."""
    counts = {}
    for meta_graph in read_saved_model_proto(saved_model_dir).meta_graphs:
        for op, count in graph_def_ops(meta_graph.graph_def).items():
            counts[op] = counts.get(op, 0) + count
    return counts
