"""Experiment configs by name: the presets shipped inside the package, or any YAML file.

`--config finetune/glue_mrpc` (or `finetune/glue_mrpc.yaml`) names a preset of the
repository's `configs/` folder, which the wheel installs as the `bert_tf.configs`
package; `--config path/to/run.yaml` names a file. An existing file wins.
"""

import importlib.resources

from bert_tf import config as config_lib
from bert_tf import storage

PACKAGE = "bert_tf.configs"
_GROUPS = ("pretrain", "finetune")


def packaged_names() -> list[str]:
    """Every preset's name, e.g. `finetune/glue_mrpc`, sorted."""
    root = importlib.resources.files(PACKAGE)
    return sorted(f"{group}/{entry.name[:-len('.yaml')]}"
                  for group in _GROUPS for entry in root.joinpath(group).iterdir()
                  if entry.name.endswith(".yaml"))


def resolve(name_or_path: str) -> str:
    """The YAML file that `--config name_or_path` means.

    Args:
      name_or_path: a path to a YAML file, or a preset name such as
        `pretrain/bert_base` (the `.yaml` suffix is optional).

    Returns:
      A path on the file system (the package is installed unpacked, so its data
      files are ordinary files).

    Raises:
      FileNotFoundError: neither a file nor a preset; the message lists the presets.
    """
    if storage.isfile(name_or_path):
        return name_or_path
    name = name_or_path[:-len(".yaml")] if name_or_path.endswith(".yaml") else name_or_path
    group, _, stem = name.partition("/")
    if group in _GROUPS and stem and "/" not in stem:
        candidate = importlib.resources.files(PACKAGE).joinpath(group, f"{stem}.yaml")
        if candidate.is_file():
            return str(candidate)
    presets = packaged_names()
    raise FileNotFoundError(
        f"--config {name_or_path}: no such file, and no preset of that name"
        f"{config_lib.nearest(name, presets)}; presets: {', '.join(presets)}")
