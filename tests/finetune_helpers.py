"""Helpers for fine-tuning tests: short in-process runs of the configs in configs/finetune/."""

import os

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def finetune_overrides(**values):
    """`--set` strings for a short, deterministic CPU run plus `values` (dotted keys)."""
    settings = {"trainer.steps_per_loop": 4, "trainer.checkpoint_every": 1000,
                "trainer.eval_batch_size": 32, "runtime.strategy": "cpu",
                "runtime.deterministic": True, "optimizer.learning_rate": 1e-3}
    settings.update(values)
    return [f"{key}={value}" for key, value in settings.items()]


def config_path(config_name):
    return os.path.join(REPO, "configs", "finetune", f"{config_name}.yaml")


def config_overrides(config_name, **values):
    """`finetune_overrides(**values)` after the shared data's location for the config's task.

    The library has no default data location; the tests read `../shared/data`.
    """
    from tests import shared_data

    with open(config_path(config_name)) as f:
        task_name = yaml.safe_load(f)["task"]
    return shared_data.finetune_data_overrides(task_name) + finetune_overrides(**values)


def finetune(config_name, model_dir, init_checkpoint, **values):
    """Loads configs/finetune/<config_name>.yaml with overrides and trains in this process.

    Returns the exit code of `bert_tf.train.run`.
    """
    from bert_tf import tasks, train

    task_class, experiment = tasks.load_experiment(config_path(config_name),
                                                   config_overrides(config_name, **values))
    return train.run(task_class, experiment, str(model_dir), init_checkpoint)


def tiny_vocab():
    """A 76-token lower-case WordPiece vocabulary (specials, letters, digits, punctuation,
    `##` letters): every GLUE sentence tokenizes, into a tiny embedding table."""
    import string

    return (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list(string.ascii_lowercase)
            + list(string.digits) + list(".,'\"-()") + ["##" + c for c in string.ascii_lowercase])


def save_tiny_encoder(directory, vocab_file, **config):
    """Saves a random 2-layer encoder of hidden size 16 over `vocab_file` (bert_tf format).

    Args:
      directory: where it goes (local or a scheme path).
      vocab_file: a vocabulary of `tiny_vocab()`'s tokens.
      **config: other `BertEncoder` arguments, e.g. `hidden_act`.
    """
    from bert_tf.checkpoints import loading
    from bert_tf.models.bert_encoder import BertEncoder

    encoder = BertEncoder(vocab_size=len(tiny_vocab()), hidden_size=16, num_layers=2,
                          num_heads=2, intermediate_size=32, max_position_embeddings=64,
                          **config)
    loading.save(encoder, str(directory), vocab_file=str(vocab_file), lower_case=True)
    return str(directory)
