"""`runtime.mixed_precision: auto`: the policy chosen from the hardware, and its config value."""

import dataclasses

import pytest
import tensorflow as tf

from bert_tf.training import precision, strategies
from bert_tf.training.trainer_config import RuntimeConfig


@pytest.mark.parametrize("device, flags, capability, expected", [
    ("cpu", {"avx2", "avx512f", "avx512_bf16"}, None, "mixed_bfloat16"),  # AMD Zen 4
    ("cpu", {"avx2", "amx_tile", "amx_bf16"}, None, "mixed_bfloat16"),  # Intel Sapphire Rapids
    ("cpu", {"avx2", "fma"}, None, "float32"),  # AMD Zen 3: bf16 would be emulated
    ("cpu", set(), None, "float32"),  # no /proc/cpuinfo
    ("tpu", set(), None, "mixed_bfloat16"),
    ("gpu", set(), (8, 6), "mixed_bfloat16"),
    ("gpu", set(), (7, 5), "mixed_float16"),
    ("gpu", set(), (6, 1), "float32"),
    ("gpu", set(), None, "float32"),
])
def test_auto_chooses_what_the_hardware_computes_natively(device, flags, capability, expected):
    chosen, reason = precision.choose_precision(device, frozenset(flags), capability)
    assert chosen == expected
    assert reason


def test_cpu_flags_are_read_from_cpuinfo(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\n"
                       "flags\t\t: fpu sse2 avx2 avx512_bf16\nbugs\t\t: sysret_ss_attrs\n")
    assert precision.cpu_flags(str(cpuinfo)) == {"fpu", "sse2", "avx2", "avx512_bf16"}
    assert precision.cpu_flags(str(tmp_path / "missing")) == frozenset()


def test_auto_on_this_machine_follows_its_cpu_flags(monkeypatch):
    strategy = tf.distribute.get_strategy()
    assert precision.resolve("mixed_float16", strategy) == "mixed_float16"
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"amx_bf16"}))
    assert precision.resolve("auto", strategy) == "mixed_bfloat16"
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"avx2"}))
    assert precision.resolve("auto", strategy) == "float32"


def test_auto_is_refused_by_a_run_of_several_workers(monkeypatch):
    strategy = tf.distribute.get_strategy()
    assert strategies.num_workers(strategy) == 1
    monkeypatch.setattr(strategies, "num_workers", lambda strategy: 2)
    with pytest.raises(ValueError, match="auto cannot be used by a run of 2 workers.*set one "
                                         "of float32, mixed_bfloat16, mixed_float16"):
        precision.resolve("auto", strategy)
    assert precision.resolve("mixed_bfloat16", strategy) == "mixed_bfloat16"


def test_the_config_accepts_auto_and_names_the_choices_otherwise():
    assert RuntimeConfig(mixed_precision="auto").mixed_precision == "auto"
    with pytest.raises(ValueError, match="runtime.mixed_precision must be one of .*'auto'.*"
                                         "got 'bf16'"):
        RuntimeConfig(mixed_precision="bf16")


@dataclasses.dataclass
class _Experiment:
    runtime: RuntimeConfig


def test_resolve_experiment_replaces_only_auto_and_model_dtype_maps_the_policy(monkeypatch):
    strategy = tf.distribute.get_strategy()
    fixed = _Experiment(RuntimeConfig(mixed_precision="mixed_float16"))
    assert precision.resolve_experiment(fixed, strategy) is fixed
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"avx512_bf16"}))
    auto = _Experiment(RuntimeConfig(mixed_precision="auto", seed=7))
    resolved = precision.resolve_experiment(auto, strategy)
    assert resolved.runtime == RuntimeConfig(mixed_precision="mixed_bfloat16", seed=7)
    assert auto.runtime.mixed_precision == "auto"  # the caller's experiment is left alone
    assert [precision.model_dtype(p) for p in ("float32", "mixed_bfloat16", "mixed_float16")] == [
        None, "mixed_bfloat16", "mixed_float16"]
    with pytest.raises(ValueError, match="auto must be resolved before the model is built"):
        precision.model_dtype("auto")
