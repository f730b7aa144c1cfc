"""The shipped experiment configs and the optimizer/schedule they describe."""

import glob
import os

import keras
import numpy as np
import pytest
from conftest import REPO

from bert_tf import config as config_lib
from bert_tf import tasks
from bert_tf.models.presets import get_preset
from bert_tf.training import optimizers

PRETRAIN = os.path.join(REPO, "configs", "pretrain")
SIZES = ["bert_tiny", "bert_mini", "bert_small", "bert_medium", "bert_base", "bert_large"]


def load(name, *overrides):
    return tasks.load_experiment(os.path.join(PRETRAIN, f"{name}.yaml"), overrides)[1]


def test_every_config_loads_strictly():
    paths = sorted(glob.glob(os.path.join(PRETRAIN, "*.yaml")))
    # Per size the paper's two phases and the fast phase 1, and the demo's two phases.
    assert len(paths) == 3 * len(SIZES) + 2
    for path in paths:
        task_class, experiment = tasks.load_experiment(path)
        assert task_class.name == "pretraining", path


@pytest.mark.parametrize("size", SIZES)
def test_pretraining_configs_have_the_paper_defaults(size):
    phase1, phase2 = load(size), load(f"{size}_seq512")
    preset = get_preset(size).to_dict()
    for experiment in (phase1, phase2):
        encoder = experiment.model.encoder.to_dict()
        assert {k: encoder[k] for k in preset if "dropout" not in k and k != "hidden_act"} == {
            k: v for k, v in preset.items() if "dropout" not in k and k != "hidden_act"}
        assert encoder["hidden_dropout"] == encoder["attention_dropout"] == 0.1
        assert encoder["max_position_embeddings"] == 512
        assert experiment.trainer.global_batch_size == 256
        optimizer = experiment.optimizer
        assert (optimizer.name, optimizer.beta_1, optimizer.beta_2, optimizer.weight_decay) == (
            "adamw", 0.9, 0.999, 0.01)
    assert (phase1.data.max_seq_length, phase1.data.max_predictions_per_seq) == (128, 20)
    assert (phase2.data.max_seq_length, phase2.data.max_predictions_per_seq) == (512, 80)
    assert phase1.optimizer.learning_rate == 1e-4 and phase1.optimizer.warmup_steps == 10000
    assert phase1.trainer.train_steps + phase2.trainer.train_steps == 1_000_000
    # Phase 2 continues phase 1's single linear decay where it stopped.
    end_of_phase1 = optimizers.learning_rate_schedule(phase1.optimizer, phase1.trainer.train_steps)
    start_of_phase2 = optimizers.learning_rate_schedule(phase2.optimizer,
                                                        phase2.trainer.train_steps)
    np.testing.assert_allclose(float(end_of_phase1(900_000)), float(start_of_phase2(0)),
                               rtol=1e-4)
    assert float(start_of_phase2(100_000)) == 0.0


@pytest.mark.parametrize("size", SIZES)
def test_fast_configs_change_only_the_first_phase_length(size):
    paper, fast = config_lib.to_dict(load(size)), config_lib.to_dict(load(f"{size}_fast"))
    assert (fast["data"].pop("max_seq_length"), fast["data"].pop("max_predictions_per_seq")) == (
        64, 10)
    del paper["data"]["max_seq_length"], paper["data"]["max_predictions_per_seq"]
    assert fast == paper


def test_unknown_keys_and_wrong_types_name_the_key(tmp_path):
    with pytest.raises(config_lib.ConfigError, match=r"trainer\.steps_per_lop"):
        load("bert_mini", "trainer.steps_per_lop=5")
    with pytest.raises(config_lib.ConfigError, match="optimizer.learning_rate must be float"):
        load("bert_mini", "optimizer.learning_rate=fast")
    bad = tmp_path / "bad.yaml"
    bad.write_text("task: pretraining\ndata:\n  max_seq_lenght: 128\n")
    with pytest.raises(config_lib.ConfigError,
                       match=r"bad\.yaml.*data\.max_seq_lenght'\]; did you mean 'max_seq_length'"):
        tasks.load_experiment(str(bad))
    with pytest.raises(config_lib.ConfigError,
                       match="unknown task 'pretrainig'; did you mean 'pretraining'"):
        bad.write_text("task: pretrainig\n")
        tasks.load_experiment(str(bad))
    with pytest.raises(config_lib.ConfigError, match="max_to_keep must be >= 2"):
        load("bert_mini", "trainer.max_to_keep=1")


def test_schedule_warms_up_then_decays_linearly():
    config = optimizers.OptimizerConfig(learning_rate=1e-3, warmup_steps=10, decay_steps=110,
                                        end_learning_rate=1e-4)
    schedule = optimizers.learning_rate_schedule(config, train_steps=999)
    values = {step: float(schedule(step)) for step in (0, 4, 9, 10, 60, 110, 500)}
    np.testing.assert_allclose(values[0], 1e-4, rtol=1e-6)  # (0 + 1) / 10 of the peak
    np.testing.assert_allclose(values[4], 5e-4, rtol=1e-6)
    np.testing.assert_allclose(values[9], 1e-3, rtol=1e-6)
    # After warmup: end + (peak - end) * (1 - step / decay_steps), as BERT's code.
    np.testing.assert_allclose(values[10], 1e-4 + 9e-4 * (1 - 10 / 110), rtol=1e-6)
    np.testing.assert_allclose(values[60], 1e-4 + 9e-4 * (1 - 60 / 110), rtol=1e-6)
    np.testing.assert_allclose(values[110], 1e-4, rtol=1e-6)
    np.testing.assert_allclose(values[500], 1e-4, rtol=1e-6)
    constant = optimizers.learning_rate_schedule(
        optimizers.OptimizerConfig(learning_rate=2e-5, warmup_steps=0, decay="constant"), 100)
    assert float(constant(0)) == float(constant(99)) == pytest.approx(2e-5)


@pytest.mark.parametrize("name", ["adamw", "lamb"])
def test_weight_decay_skips_layer_norm_and_biases(name):
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(4, name="dense"),
                              keras.layers.LayerNormalization(name="layer_norm")])
    config = optimizers.OptimizerConfig(name=name, learning_rate=0.1, warmup_steps=0,
                                        decay="constant", weight_decay=0.5)
    optimizer = optimizers.build_optimizer(config, train_steps=10)
    for variable in model.trainable_variables:
        variable.assign(np.full(variable.shape, 2.0, np.float32))
    before = {v.path: v.numpy() for v in model.trainable_variables}
    # Zero gradients: Adam's and LAMB's own updates are zero, only decay moves weights.
    optimizer.apply([np.zeros(v.shape, np.float32) for v in model.trainable_variables],
                    model.trainable_variables)
    for variable in model.trainable_variables:
        if variable.name == "kernel":
            np.testing.assert_allclose(variable.numpy(), before[variable.path] * (1 - 0.1 * 0.5))
        else:
            np.testing.assert_array_equal(variable.numpy(), before[variable.path])


FINETUNE = os.path.join(REPO, "configs", "finetune")
FINETUNE_CONFIGS = {
    # name: (task, expected data section values)
    **{f"glue_{name}": ("glue", {"task_name": name}) for name in
       ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli")},
    "squad_v1": ("squad", {"version_2_with_negative": False, "max_seq_length": 384,
                           "doc_stride": 128, "max_query_length": 64, "n_best_size": 20,
                           "max_answer_length": 30}),
    "squad_v2": ("squad", {"version_2_with_negative": True, "max_seq_length": 384}),
    "ner_conll2003": ("ner", {"max_seq_length": 128}),
    "ner_conll2003_features": ("ner_features", {"max_seq_length": 128}),
    "swag": ("swag", {"max_seq_length": 128}),
}


def test_every_finetune_config_is_listed():
    names = {os.path.basename(p)[:-5] for p in glob.glob(os.path.join(FINETUNE, "*.yaml"))}
    assert names == set(FINETUNE_CONFIGS)


@pytest.mark.parametrize("name", sorted(FINETUNE_CONFIGS))
def test_finetune_configs_have_the_paper_recipe(name):
    task, data_values = FINETUNE_CONFIGS[name]
    task_class, experiment = tasks.load_experiment(os.path.join(FINETUNE, f"{name}.yaml"))
    assert task_class.name == task
    for key, value in data_values.items():
        assert getattr(experiment.data, key) == value, key
    # Appendix A.3: batch 16 or 32 (SQuAD v2.0: 48, SWAG: 16), lr in
    # {5e-5, 3e-5, 2e-5}, 2 to 4 epochs, 10 % warmup, dropout 0.1 (the
    # encoder's, taken from the checkpoint), Adam with weight decay 0.01.
    assert experiment.trainer.global_batch_size in (16, 32, 48)
    # A frozen encoder's BiLSTM trains from scratch at an LSTM's rate, not BERT's.
    rates = (1e-3,) if name == "ner_conll2003_features" else (5e-5, 3e-5, 2e-5)
    assert experiment.optimizer.learning_rate in rates
    assert 2 <= experiment.trainer.train_epochs <= 4
    assert experiment.optimizer.warmup_proportion == 0.1
    assert experiment.optimizer.warmup_steps == 0
    assert experiment.optimizer.weight_decay == 0.01
    assert experiment.model.encoder is None and experiment.model.head_dropout is None


def test_warmup_proportion_is_a_fraction_of_the_run():
    config = optimizers.OptimizerConfig(learning_rate=1e-3, warmup_steps=0,
                                        warmup_proportion=0.1)
    schedule = optimizers.learning_rate_schedule(config, train_steps=200)
    assert schedule.warmup_steps == 20
    np.testing.assert_allclose(float(schedule(19)), 1e-3, rtol=1e-6)
    np.testing.assert_allclose(float(schedule(100)), 1e-3 * (1 - 100 / 200), rtol=1e-6)
    with pytest.raises(ValueError, match="warmup_steps .* and optimizer.warmup_proportion"):
        optimizers.OptimizerConfig(warmup_steps=10, warmup_proportion=0.1)
