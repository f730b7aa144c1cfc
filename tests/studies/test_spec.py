"""Studies as data: loading, profiles, and errors naming the file and key."""

import pytest

from bert_tf import config as config_lib
from bert_tf.studies import spec as spec_lib


def test_the_study_and_its_ci_profile():
    full = spec_lib.load_study("pretrain_vs_random")
    assert [arm.init for arm in full.arms] == ["pretrained:mlm_nsp", "random:mlm_nsp"]
    assert [arm.name for arm in full.reference_arms] == ["minilm"]
    assert [task.name for task in full.suite.tasks] == ["stsb", "conll2003", "mrpc", "rte",
                                                       "sst2"]
    assert full.suite.learning_rates == [1e-4, 5e-5, 3e-5, 2e-5]
    assert full.suite.seeds == [0, 1, 2]
    ci = spec_lib.load_study("pretrain_vs_random", "ci")
    # Lists are replaced, mappings merged: the corpus settings survive.
    assert ci.reference_arms == [] and ci.suite.seeds == [0]
    assert ci.corpus == full.corpus and ci.arms == full.arms
    assert "trainer.train_steps=8" in ci.pretraining_overrides


def _write(tmp_path, text):
    path = tmp_path / "study.yaml"
    path.write_text(text)
    return str(path)


STUDY = """
name: s
pretraining: [{name: p, config: configs/pretrain/bert_tiny.yaml}]
arms: [{name: a, init: "pretrained:p"}, {name: b, init: "%s"}]
suite: {tasks: [{name: stsb, config: configs/finetune/glue_stsb.yaml}], learning_rates: [1.0e-4]}
"""


def test_an_arm_on_an_unknown_pretraining_is_an_error(tmp_path):
    with pytest.raises(config_lib.ConfigError, match=r"arm 'b' refers to pretraining 'q'"):
        spec_lib.load_study(_write(tmp_path, STUDY % "random:q"))


def test_an_unknown_init_kind_is_an_error(tmp_path):
    with pytest.raises(config_lib.ConfigError, match=r"arm 'b' has init 'scratch'"):
        spec_lib.load_study(_write(tmp_path, STUDY % "scratch"))


def test_unknown_keys_and_profiles_are_errors(tmp_path):
    path = _write(tmp_path, STUDY % "random:p" + "learning_rate: 1\n")
    with pytest.raises(config_lib.ConfigError, match=r"unknown key\(s\) \['learning_rate'\]"):
        spec_lib.load_study(path)
    path = _write(tmp_path, STUDY % "random:p")
    with pytest.raises(config_lib.ConfigError, match=r"no profile 'fast'"):
        spec_lib.load_study(path, "fast")


def test_an_unknown_study_lists_the_known_ones():
    with pytest.raises(FileNotFoundError, match=r"pretrain_vs_random"):
        spec_lib.load_study("no_such_study")
