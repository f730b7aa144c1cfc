"""One packing key for both task families: its default, its range, and the keys it replaced."""

import dataclasses
import glob
import os
import re

import pytest
import yaml

from bert_tf import config as config_lib
from bert_tf import tasks, train
from bert_tf.tasks import row_packing
from bert_tf.tasks.finetuning import FinetuningDataConfig
from bert_tf.tasks.pretraining import PretrainingDataConfig

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIGS = os.path.join(REPO, "configs")
# A config of each family (read by path: the checkout's, whatever is installed), and
# the retired keys with a value of theirs.
FAMILIES = ["pretrain/bert_tiny.yaml", "finetune/glue_mrpc.yaml"]
RETIRED = [("packing", "true"), ("max_examples_per_row", "4")]


def test_both_families_default_to_one_sequence_per_row():
    for data_class in (PretrainingDataConfig, FinetuningDataConfig):
        data = data_class()
        assert (data.max_sequences_per_row, data.packing_window) == (1, 256), data_class
        assert not row_packing.is_packed(data)
        assert row_packing.packing_options(data) is None


def test_the_packaged_configs_state_their_packing():
    for path in sorted(glob.glob(os.path.join(CONFIGS, "pretrain", "*.yaml"))):
        data = tasks.load_experiment(path)[1].data
        assert data.max_sequences_per_row == 3, path
        options = row_packing.packing_options(data)
        assert (options.max_sequences_per_row, options.window) == (3, 256), path
    # The fine-tuning recipes count examples per batch: one per row.
    for name in ("glue_mrpc", "glue_sst2", "ner_conll2003", "squad_v1", "swag"):
        data = tasks.load_experiment(os.path.join(CONFIGS, "finetune", f"{name}.yaml"))[1].data
        assert data.max_sequences_per_row == 1, name


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("old_key, value", RETIRED)
def test_a_retired_key_is_refused_naming_the_new_one(family, old_key, value, tmp_path):
    expected = (rf"data\.{old_key} is no longer a key: set data\.max_sequences_per_row "
                r"instead \(")
    family = os.path.join(CONFIGS, family)
    with pytest.raises(config_lib.ConfigError, match=f"^--set: {expected}") as raised:
        tasks.load_experiment(family, [f"data.{old_key}={value}"])
    assert "\n" not in str(raised.value)
    # The same in a YAML file: the file is named.
    text = open(family, encoding="utf-8").read()
    path = tmp_path / "old.yaml"
    path.write_text(text.replace("\ndata:\n", f"\ndata:\n  {old_key}: {value}\n", 1))
    with pytest.raises(config_lib.ConfigError,
                       match=f"^{re.escape(str(path))}: {expected}") as raised:
        tasks.load_experiment(str(path))
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("family", FAMILIES)
def test_the_training_command_prints_one_line(family, tmp_path, capsys):
    code = train.main(["--config", os.path.join(CONFIGS, family),
                       "--model_dir", str(tmp_path / "run"), "--set", "data.packing=true"])
    assert code == 2
    error = capsys.readouterr().err
    assert error.startswith("error: --set: data.packing is no longer a key: set "
                            "data.max_sequences_per_row instead")
    assert error.count("\n") == 1
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("rows", [0, 257])
def test_the_count_must_fit_the_window(rows):
    data = dataclasses.replace(PretrainingDataConfig(), max_sequences_per_row=rows)
    with pytest.raises(ValueError, match=r"data\.max_sequences_per_row must be in "
                                         rf"\[1, data\.packing_window=256\].*got {rows}"):
        row_packing.check(data)
    row_packing.check(dataclasses.replace(data, max_sequences_per_row=256))


@pytest.mark.parametrize("family, old_data, expected", [
    # Earlier versions: a switch beside a count, the count applying only with it on.
    ("pretrain/bert_tiny.yaml", {"packing": True, "max_sequences_per_row": 3}, 3),
    ("pretrain/bert_tiny.yaml", {"packing": False, "max_sequences_per_row": 3}, 1),
    ("finetune/glue_mrpc.yaml", {"packing": True, "max_examples_per_row": 8}, 8),
    ("finetune/glue_mrpc.yaml", {"packing": False, "max_examples_per_row": 8}, 1),
])
def test_a_run_directory_of_an_earlier_version_reads_with_the_same_meaning(
        family, old_data, expected, tmp_path):
    from bert_tf.training import run_directory

    values = config_lib.to_dict(tasks.load_experiment(os.path.join(CONFIGS, family))[1])
    values["data"].pop("max_sequences_per_row")
    values["data"].update(old_data)
    path = tmp_path / run_directory.PARAMS_FILE
    path.write_text(yaml.safe_dump(values))
    # The run's own record: read as today's key.
    assert run_directory.read_params(str(tmp_path))["data"]["max_sequences_per_row"] == expected
    _, experiment = tasks.load_experiment(str(path), recorded=True)
    assert experiment.data.max_sequences_per_row == expected
    # The same file given as a user's config: the one-line error naming the new key.
    with pytest.raises(config_lib.ConfigError, match=r"is no longer a key: set "
                                                     r"data\.max_sequences_per_row"):
        tasks.load_experiment(str(path))
