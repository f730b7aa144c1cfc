"""Reading the JSON side files of checkpoints (configs, metadata, shard indexes)."""

import json

from bert_tf import storage


def read_json_object(path, missing_hint=""):
    """The JSON object in `path`; errors name the file and what was wrong.

    Raises:
      FileNotFoundError: `path` does not exist (with `missing_hint` appended).
      ValueError: the file is not valid JSON or does not hold an object.
    """
    if not storage.isfile(path):
        raise FileNotFoundError(f"{path} not found{'; ' + missing_hint if missing_hint else ''}")
    with storage.open(path, encoding="utf-8") as f:
        try:
            values = json.load(f)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(f"{path}: not valid JSON ({e})") from e
    if not isinstance(values, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(values).__name__}")
    return values
