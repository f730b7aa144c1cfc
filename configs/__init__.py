"""The experiment presets (`pretrain/*.yaml`, `finetune/*.yaml`), shipped as `bert_tf.configs`.

`--config finetune/glue_mrpc` names one of them; see `bert_tf.packaged_configs`.
"""
