"""`python tests/training/restore_probe.py DUMP TRAIN_ARGS...`: `python -m bert_tf.train`
that also pickles the state it restored to DUMP, right after the restore.

`{worker}` in DUMP becomes the worker's index in `TF_CONFIG` (0 without one).

DUMP maps each checkpoint key of the step, the loss scale and every model and
optimizer variable (`ckpt-N`'s `.../.ATTRIBUTES/VARIABLE_VALUE` keys) to the
value the run holds before its first step, so a test compares it with the
checkpoint it resumed.
"""

import json
import os
import pickle
import sys


def _checkpoint_key(*parts):
    # tf.train.Checkpoint escapes object names: "." as "..", "/" as ".S".
    names = [part.replace(".", "..").replace("/", ".S") for part in parts]
    return "/".join(names) + "/.ATTRIBUTES/VARIABLE_VALUE"


def main():
    from bert_tf import train
    from bert_tf.training import trainer
    from bert_tf.training.checkpointing import stable_variable_dict

    worker = json.loads(os.environ.get("TF_CONFIG") or "{}").get("task", {}).get("index", 0)
    dump = sys.argv[1].format(worker=worker)

    class ProbedTrainer(trainer.Trainer):
        def _restore_or_initialize(self):
            restored = super()._restore_or_initialize()
            state = {_checkpoint_key("step"): self.step.numpy(),
                     _checkpoint_key("loss_scale", "scale"): self.loss_scale.scale.numpy(),
                     _checkpoint_key("loss_scale", "good_steps"):
                         self.loss_scale.good_steps.numpy()}
            for name, variables in (("model_variables", self.model.variables),
                                    ("optimizer_variables", self.optimizer.variables)):
                for key, variable in stable_variable_dict(variables).items():
                    state[_checkpoint_key(name, key)] = variable.numpy()
            with open(dump, "wb") as f:
                pickle.dump(state, f)
            return restored

    trainer.Trainer = ProbedTrainer
    return train.main(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
