"""Time to train: held-out MLM accuracy to a fixed target, recipe by recipe (MLPerf-style).

`python -m research.study time_to_train --out DIR [--profile ci] [--timing_only | --quality]
[--records DIR]` (research/configs/time_to_train.yaml). Modules:

- `spec`: the benchmark as data: target, held-out measurement, recipes and their phases;
- `flops`: training FLOPs per step, counted from the architecture, length and batch;
- `runner`: each recipe's phases trained until the target or the step budget, resumably;
- `timing`: every recipe's time per step, measured in one short run on one machine;
- `quality`: the reference and the fastest recipe fine-tuned from their checkpoints at the
  target, by a study's suite (`--quality`);
- `report`: results.json, report.md and plots from the run folders, the timing and the
  fine-tuning runs;
- `run_units`: the benchmark run by run (`--units`): each run pretrained, fine-tuned at once
  and recorded, so the round goes on across machines that lose their disk;
- `records`: every phase's record (config, curves, times; no checkpoint) and the report,
  small enough to commit (`--records`).
"""
