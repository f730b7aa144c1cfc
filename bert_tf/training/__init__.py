"""The trainer: task-agnostic infrastructure that trains any `bert_tf.tasks` task.

One job per module:

    trainer.py          the `Trainer`: builds a run's pieces and runs its loop, phase by phase
    resolution.py       the run's final experiment, decided once before anything is built
    run_directory.py    the run directory's files: params.yaml, eval results, the resume check
    trainer_config.py   the `trainer` and `runtime` sections of an experiment config
    train_step.py       the replica step and the inner loops, shared by every task and strategy
    loop_schedule.py    where loops end, and which boundaries checkpoint or evaluate
    loop_state.py       what one training call's loop holds open, and what it has seen
    loop_metrics.py     a loop's training metrics from its steps' sums
    evaluation.py       evaluating during training: on the host, or over held-out batches
    training_result.py  what a training call returns, and the fingerprint of its weights
    checkpointing.py    training checkpoints: everything needed to resume a run exactly
    cluster_shape.py    the cluster shape a checkpoint was written with; resuming on another
    divergence.py       non-finite steps: never checkpointed; too many roll back and stop
    input_faults.py     training and evaluation files that fail mid-run: one line, nothing lost
    lost_workers.py     noticing a worker of a multi-worker run that disappeared
    preemption.py       TensorFlow's coordinated preemption handling (multi-worker, TPU)
    signals.py          stopping on SIGTERM or Ctrl-C at a step boundary, in bounded time
    exit_codes.py       the exit codes that tell a cluster manager to restart the job
    run_lock.py         one live trainer per model_dir
    strategies.py       choosing and building the tf.distribute strategy; its input pipelines
    strategy_names.py   the --strategy names (no TensorFlow import, for --help)
    precision.py        `runtime.mixed_precision: auto`: the fastest native precision here
    loss_scale.py       dynamic loss scaling for mixed_float16
    optimizers.py       optimizers and learning-rate schedules
    fixed_shapes.py     what a TPU needs of the training batches: one shape every step
    inference.py        the model in inference mode as one traced function
    summaries.py        TensorBoard event files: model_dir/train and model_dir/eval
    progress.py         the console's progress line; a multi-phase run's plan for its ETA
    profiler.py         TensorFlow's profiler over trainer.profile_steps
    heap_release.py     hands freed heap memory back to the operating system
"""
