"""Studies as data: loading, profiles, and errors naming the file and key."""

import pytest

from bert_tf import config as config_lib
from research.studies import spec as spec_lib


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


TABLES = """
name: s
pretraining: [{name: p, config: configs/pretrain/bert_tiny.yaml}]
arms: [{name: a, init: "pretrained:p"}, {name: b, init: "random:p", tasks: [rte]}]
suite:
  learning_rates: [1.0e-4]
  tasks: [{name: stsb, config: configs/finetune/glue_stsb.yaml},
          {name: rte, config: configs/finetune/glue_rte.yaml, learning_rates: [%s]}]
tables: [%s]
"""


@pytest.mark.parametrize("rate, table, message", [
    ("1.0e-3", "{name: t, tasks: [stsb], rows: [{arm: b}]}",
     r"tables\[0\] \('t'\): arm 'b' does not fine-tune on \['stsb'\]"),
    ("1.0e-3", "{name: t, tasks: [rte], rows: [{arm: c}]}", r"row arm 'c' is not an arm"),
    ("1.0e-3", "{name: t, tasks: [rte], metrics: [f1], rows: [{arm: a}]}",
     r"give either tasks .* or metrics"),
    ("1.0e-3", "{name: t, metrics: [f1], rows: [{arm: a}]}", r"row 'a' needs a task exactly"),
    ("1.0e-3", "{name: t, pretraining_metrics: [nsp_accuracy], tasks: [rte], rows: [{arm: b}]}",
     r"row 'b' shows pretraining metrics but its init is 'random:p'"),
    ("1.0e-3", "{name: t, pretraining_metrics: [bleu], tasks: [rte], rows: [{arm: a}]}",
     r"pretraining_metrics \['bleu'\] are not among"),
    ("1.0e-3", "{name: t, tasks: [rte], paper_columns: [x, y], rows: [{arm: a, paper: [1]}]}",
     r"row 'a' has 1 paper values for 2 paper_columns"),
    ("-1.0", "{name: t, tasks: [rte], rows: [{arm: a}]}",
     r"suite.tasks 'rte' learning_rates must be positive"),
])
def test_inconsistent_tables_and_task_grids_are_errors(tmp_path, rate, table, message):
    with pytest.raises(config_lib.ConfigError, match=message):
        spec_lib.load_study(_write(tmp_path, TABLES % (rate, table)))


def test_arm_tasks_and_task_grids(tmp_path):
    spec = spec_lib.load_study(_write(tmp_path, TABLES % (
        "1.0e-3, 3.0e-4", "{name: t, tasks: [rte], rows: [{arm: b}, {arm: a}]}")))
    assert [t.name for t in spec.arm_tasks(spec.arms[0])] == ["stsb", "rte"]
    assert [t.name for t in spec.arm_tasks(spec.arms[1])] == ["rte"]
    stsb, rte = spec.suite.tasks
    assert spec.suite.learning_rates_of(stsb) == [1e-4]
    assert spec.suite.learning_rates_of(rte) == [1e-3, 3e-4]


def test_the_ablation_studies_load():
    ablations = spec_lib.load_study("ablations")
    assert [t.name for t in ablations.tables] == ["table5_pretraining_tasks",
                                                   "table6_model_size", "table8_masking"]
    features = spec_lib.load_study("feature_based")
    (table,) = features.tables
    assert [row.task for row in table.rows] == [t.name for t in features.suite.tasks]
    for name in ("ablations", "feature_based"):
        assert spec_lib.load_study(name, "ci").suite.seeds == [0]
