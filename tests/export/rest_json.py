"""TF Serving's REST predict API, modelled for tests: a JSON request body -> the
signature and the tensors the server would feed, and outputs -> the JSON body it answers.

The rules follow TF Serving's REST API ("Specifying input tensors" and "Response
format" in tensorflow/serving's api_rest.md):

* `signature_name` picks the signature, "serving_default" when absent.
* Row format: `instances` is a list with one entry per example; each entry is an
  object holding every named input (or, for a signature of one input, the bare
  value). Each input's tensor stacks its entries, so all share the batch size.
  Answered as `predictions`: a list of one object per example, or of bare values
  when the signature has one output.
* Columnar format: `inputs` is an object of every named input's whole batch (or the
  bare value for a signature of one input). Answered as `outputs`: an object of
  every output, or the bare value when the signature has one output.
* JSON strings fill string tensors, numbers numeric ones; nested lists give the shape.
"""

import numpy as np

DEFAULT_SIGNATURE = "serving_default"
_PYTHON_TYPES = {"string": str, "int32": int, "int64": int, "float32": (int, float)}


class RestRequestError(ValueError):
    """A request body TF Serving would refuse."""


def _leaves(value):
    if isinstance(value, list):
        for item in value:
            yield from _leaves(item)
    else:
        yield value


def _tensor(name, value, spec):
    """`value` (nested lists) as the ndarray TF Serving feeds for the input `spec`."""
    python_type = _PYTHON_TYPES[spec["dtype"]]
    bad = [leaf for leaf in _leaves(value)
           if not isinstance(leaf, python_type) or isinstance(leaf, bool)]
    if bad:
        raise RestRequestError(f"{name}: {bad[0]!r} is not a JSON value of a "
                               f"{spec['dtype']} tensor")
    array = np.array(value, dtype=object if spec["dtype"] == "string" else spec["dtype"])
    shape = spec["shape"]
    if array.dtype == object and any(isinstance(v, list) for v in array.flat):
        raise RestRequestError(f"{name}: ragged lists")
    if shape is not None and (array.ndim != len(shape) or any(
            d not in (-1, got) for d, got in zip(shape, array.shape))):
        raise RestRequestError(f"{name}: shape {list(array.shape)}, the signature takes "
                               f"{shape}")
    if spec["dtype"] == "string":
        array = np.vectorize(lambda s: s.encode("utf-8"), otypes=[object])(array)
    return array


def request_tensors(body, signatures):
    """(signature name, {input: ndarray}, row format?) of a predict request body.

    Args:
      body: the parsed JSON request.
      signatures: {name: {"inputs": {input: {"dtype", "shape"}}, ...}}, shapes with -1
        for unknown dimensions.

    Raises:
      RestRequestError: naming what TF Serving would refuse.
    """
    unknown = sorted(set(body) - {"signature_name", "instances", "inputs"})
    if unknown or ("instances" in body) == ("inputs" in body):
        raise RestRequestError(f"a request holds 'instances' or 'inputs' (and optionally "
                               f"'signature_name'); got keys {sorted(body)}")
    name = body.get("signature_name", DEFAULT_SIGNATURE)
    if name not in signatures:
        raise RestRequestError(f"no signature {name!r}; the export has {sorted(signatures)}")
    specs = signatures[name]["inputs"]
    row_format = "instances" in body
    if row_format:
        rows = body["instances"]
        if not isinstance(rows, list) or not rows:
            raise RestRequestError("'instances' must be a non-empty list")
        if len(specs) == 1 and not all(isinstance(row, dict) for row in rows):
            (only,) = specs
            rows = [{only: row} for row in rows]
        if not all(isinstance(row, dict) and sorted(row) == sorted(specs) for row in rows):
            raise RestRequestError(f"every instance must name the inputs {sorted(specs)}")
        columns = {key: [row[key] for row in rows] for key in specs}
    else:
        columns = body["inputs"]
        if len(specs) == 1 and not isinstance(columns, dict):
            columns = {next(iter(specs)): columns}
        if not isinstance(columns, dict) or sorted(columns) != sorted(specs):
            raise RestRequestError(f"'inputs' must name the inputs {sorted(specs)}")
    return name, {key: _tensor(key, columns[key], specs[key]) for key in specs}, row_format


def _plain(value):
    """An output ndarray as JSON values (strings decoded)."""
    if value.dtype == object:
        return np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(value).tolist()
    return value.tolist()


def response_body(outputs, row_format):
    """The JSON body TF Serving answers with, for {output: ndarray} of a batch."""
    plain = {key: _plain(value) for key, value in sorted(outputs.items())}
    if row_format:
        batch = len(next(iter(plain.values())))
        if len(plain) == 1:
            return {"predictions": next(iter(plain.values()))}
        return {"predictions": [{key: value[i] for key, value in plain.items()}
                                for i in range(batch)]}
    if len(plain) == 1:
        return {"outputs": next(iter(plain.values()))}
    return {"outputs": plain}
