"""Helpers for fine-tuning tests: short in-process runs of the configs in configs/finetune/."""

import os

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def finetune_overrides(**values):
    """`--set` strings for a short, deterministic CPU run plus `values` (dotted keys)."""
    settings = {"trainer.steps_per_loop": 4, "trainer.checkpoint_every": 1000,
                "trainer.eval_batch_size": 32, "runtime.strategy": "cpu",
                "runtime.deterministic": True, "optimizer.learning_rate": 1e-3}
    settings.update(values)
    return [f"{key}={value}" for key, value in settings.items()]


def finetune(config_name, model_dir, init_checkpoint, **values):
    """Loads configs/finetune/<config_name>.yaml with overrides and trains in this process.

    Returns the exit code of `bert_tf.train.run`.
    """
    from bert_tf import tasks, train

    path = os.path.join(REPO, "configs", "finetune", f"{config_name}.yaml")
    task_class, experiment = tasks.load_experiment(path, finetune_overrides(**values))
    return train.run(task_class, experiment, str(model_dir), init_checkpoint)
