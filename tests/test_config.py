import dataclasses
import os

import pytest

from bert_tf import config
from bert_tf.models.encoder_config import EncoderConfig


@dataclasses.dataclass(frozen=True)
class Optimizer:
    name: str = "adamw"
    learning_rate: float = 1e-4
    warmup_steps: int = 10000
    exclude_from_weight_decay: tuple[str, ...] = ("LayerNorm", "bias")


@dataclasses.dataclass(frozen=True)
class Experiment:
    encoder: EncoderConfig = EncoderConfig()
    optimizer: Optimizer = Optimizer()
    train_files: list[str] = dataclasses.field(default_factory=list)
    init_checkpoint: str | None = None


def _write(tmp_path, text):
    path = os.path.join(tmp_path, "experiment.yaml")
    with open(path, "w") as f:
        f.write(text)
    return path


def test_yaml_and_overrides(tmp_path):
    path = _write(tmp_path, "encoder:\n  num_layers: 4\n  hidden_size: 256\n  num_heads: 4\n"
                            "optimizer:\n  learning_rate: 1\ntrain_files: [a.txt, b.txt]\n")
    # YAML 1.1 reads 1e-4 as a string; float fields accept it.
    loaded = config.load_config(Experiment, None, ["optimizer.learning_rate=1e-4"])
    assert loaded.optimizer.learning_rate == 1e-4
    with pytest.raises(config.ConfigError, match="learning_rate must be float, got str 'fast'"):
        config.load_config(Experiment, None, ["optimizer.learning_rate=fast"])
    loaded = config.load_config(Experiment, path, ["optimizer.warmup_steps=100",
                                                   "init_checkpoint=runs/base"])
    assert loaded.encoder.num_layers == 4 and loaded.encoder.intermediate_size == 3072
    assert loaded.optimizer.learning_rate == 1.0
    assert isinstance(loaded.optimizer.learning_rate, float)
    assert loaded.optimizer.warmup_steps == 100
    assert loaded.train_files == ["a.txt", "b.txt"]
    assert loaded.init_checkpoint == "runs/base"
    assert loaded.optimizer.exclude_from_weight_decay == ("LayerNorm", "bias")


def test_unknown_keys_and_wrong_types_name_the_key(tmp_path):
    with pytest.raises(config.ConfigError, match=r"unknown key\(s\) \['optimizer.learning_rat'\]"):
        config.load_config(Experiment, _write(tmp_path, "optimizer:\n  learning_rat: 0.1\n"))
    with pytest.raises(config.ConfigError, match=r"encoder.num_layers must be int, got str '4'"):
        config.load_config(Experiment, _write(tmp_path, "encoder:\n  num_layers: '4'\n"))
    with pytest.raises(config.ConfigError, match=r"optimizer.warmup_steps must be int, got bool"):
        config.load_config(Experiment, None, ["optimizer.warmup_steps=true"])
    with pytest.raises(config.ConfigError, match=r"unknown key 'optimiser'"):
        config.load_config(Experiment, None, ["optimiser.name=lamb"])
    with pytest.raises(config.ConfigError, match="must look like key.path=value"):
        config.load_config(Experiment, None, ["optimizer.name"])
    with pytest.raises(config.ConfigError, match="hidden_size .* divisible by num_heads"):
        config.load_config(Experiment, None, ["encoder.num_heads=5"])


def test_an_override_whose_value_is_not_yaml_is_a_config_error_naming_it():
    with pytest.raises(config.ConfigError, match=r"--set: the value of override "
                                                 r"'train_files=\[a' is not valid YAML"):
        config.load_config(Experiment, None, ["train_files=[a"])


def test_override_keys_are_the_parsed_keys_with_every_key_a_mapping_sets():
    keys = config.override_keys([" optimizer.warmup_steps = 3", "encoder={num_layers: 2}",
                                 "train_files=[a=b.txt]"])
    assert keys == {"optimizer.warmup_steps", "encoder", "encoder.num_layers", "train_files"}
    with pytest.raises(config.ConfigError, match="must look like key.path=value"):
        config.override_keys(["optimizer.name"])

def test_yaml_is_read_safely(tmp_path):
    path = _write(tmp_path, "init_checkpoint: !!python/object/apply:os.system ['echo pwned']\n")
    with pytest.raises(config.ConfigError, match="not valid YAML"):
        config.load_config(Experiment, path)
    with pytest.raises(FileNotFoundError, match="config file not found: .*missing.yaml"):
        config.load_config(Experiment, os.path.join(tmp_path, "missing.yaml"))


def test_dump_round_trips(tmp_path):
    original = config.load_config(Experiment, None, ["encoder.hidden_act=gelu_tanh",
                                                     "train_files=[x.txt]"])
    path = os.path.join(tmp_path, "params.yaml")
    config.dump_config(original, path)
    assert config.load_config(Experiment, path) == original


def test_a_mistyped_key_or_preset_suggests_the_nearest_valid_ones(tmp_path):
    from bert_tf import packaged_configs

    with pytest.raises(config.ConfigError) as raised:
        config.load_config(Experiment, None, ["optimizer.warmup_step=5"])
    assert "did you mean 'optimizer.warmup_steps'?" in str(raised.value)
    with pytest.raises(config.ConfigError) as raised:
        config.load_config(Experiment, _write(tmp_path, "optimizer:\n  learning_rat: 0.1\n"))
    assert "did you mean 'learning_rate'?" in str(raised.value)
    with pytest.raises(config.ConfigError) as raised:
        config.load_config(Experiment, None, ["optimizer.zzz=1"])
    assert "did you mean" not in str(raised.value)  # nothing close: no guess
    with pytest.raises(FileNotFoundError) as raised:
        packaged_configs.resolve("finetune/glue_mrcp")
    assert "did you mean 'finetune/glue_mrpc'" in str(raised.value)
