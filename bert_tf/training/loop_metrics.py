"""The metrics a training loop reports (TensorBoard's `train/`, the progress line)."""


def loop_metrics(task_metrics: dict, sums: dict, num_steps: int, seconds: float,
                 learning_rate: float, loss_scale: float, untimed: dict | None = None) -> dict:
    """The metrics of a loop's `num_steps` steps from their summed `TrainStep` sums.

    Args:
      task_metrics: the task's metrics of the loop (`Task.metrics(sums)`).
      sums: the loop's sums (the task's keys plus `finite_steps`, `gradient_norm`,
        `examples` and `tokens`), as numbers.
      num_steps: the steps the loop ran.
      seconds: the time of them all, or of all but the first when `untimed` is given.
      learning_rate: the optimizer's learning rate after the loop.
      loss_scale: the float16 loss scale after the loop (1 without scaling).
      untimed: the first step's sums when it is left out of the throughput (it
        traced the train step), else None.
    """
    finite_steps = float(sums["finite_steps"])
    timed, timed_steps = sums, num_steps
    if untimed is not None:
        timed = {key: sums[key] - untimed[key] for key in sums}
        timed_steps -= 1
    metrics = dict(task_metrics)
    metrics.update({
        "learning_rate": learning_rate,
        "gradient_norm": float(sums["gradient_norm"]) / max(finite_steps, 1.0),
        "loss_scale": loss_scale,
        "skipped_steps": num_steps - finite_steps,
        # Packed rows hold several examples: the task counts them.
        "examples_per_second": float(timed["examples"]) / seconds,
        "tokens_per_second": float(timed["tokens"]) / seconds,
        "steps_per_second": timed_steps / seconds,
    })
    return metrics
