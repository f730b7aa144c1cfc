"""Studies: many training units run and reported on together (`python -m research.study`).

- `spec`: a study as data (research/configs/<name>.yaml): pretraining runs,
  arms, the fine-tuning suite, profiles;
- `corpus`: the pretraining corpus built from the offline texts, with held-out documents;
- `units`: one resumable `python -m bert_tf.train` run;
- `runner`: the study's units in order, with the learning-rate selection rule;
- `report`: results.json, report.md and plots from the finished units.
"""
