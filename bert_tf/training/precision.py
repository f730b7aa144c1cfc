"""`runtime.mixed_precision: auto`: the fastest precision this hardware computes natively.

bf16 matmuls are native on TPUs, on NVIDIA GPUs from compute capability 8.0
(Ampere) and on x86 CPUs with AVX512_BF16 (AMD Zen 4, Intel Cooper Lake and
later) or AMX (Intel Sapphire Rapids and later). On other CPUs TensorFlow
emulates bf16 and float32 is the faster one (BERT-mini on a 2-core AMD Zen 3:
18.4 sequences/s in float32 against 16.1 in bf16; BENCHMARKS.md). GPUs of
compute capability 7.x (Volta, Turing) have float16 tensor cores, used with
loss scaling (`mixed_float16`); older GPUs gain nothing from either.

The trainer and `bert_tf.evaluate` both build their model through
`resolve_experiment` and `model_dtype`, so a run is evaluated in the policy
it would train in on the same machine.
"""

import dataclasses
import logging

import tensorflow as tf

from bert_tf.training import strategies

AUTO = "auto"
FLOAT32 = "float32"
BFLOAT16 = "mixed_bfloat16"
FLOAT16 = "mixed_float16"
# /proc/cpuinfo flags of x86 CPUs whose bf16 matmuls are native.
CPU_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
CPUINFO = "/proc/cpuinfo"


def cpu_flags(cpuinfo_path: str = CPUINFO) -> frozenset[str]:
    """The CPU feature flags Linux reports, or none where the file is missing (macOS, Windows).

    Args:
      cpuinfo_path: the `/proc/cpuinfo` file to read.
    """
    try:
        with open(cpuinfo_path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def choose_precision(device: str, flags: frozenset[str] = frozenset(),
                     gpu_compute_capability: tuple[int, int] | None = None) -> tuple[str, str]:
    """(precision, reason): what `auto` means on `device` (pure, for testing).

    Args:
      device: "tpu", "gpu" or "cpu": where the run's replicas compute.
      flags: the CPU's feature flags (for "cpu").
      gpu_compute_capability: the slowest GPU's (major, minor) (for "gpu";
        None when TensorFlow does not report it).
    """
    if device == "tpu":
        return BFLOAT16, "TPUs compute bf16 natively"
    if device == "gpu":
        if gpu_compute_capability is None:
            return FLOAT32, "the GPU's compute capability is unknown"
        capability = ".".join(map(str, gpu_compute_capability))
        if gpu_compute_capability >= (8, 0):
            return BFLOAT16, f"GPU compute capability {capability} has bf16 tensor cores"
        if gpu_compute_capability >= (7, 0):
            return FLOAT16, f"GPU compute capability {capability} has float16 tensor cores"
        return FLOAT32, f"GPU compute capability {capability} has no 16-bit tensor cores"
    native = [flag for flag in CPU_BF16_FLAGS if flag in flags]
    if native:
        return BFLOAT16, f"the CPU has {' and '.join(native)}"
    return FLOAT32, (f"the CPU has none of {', '.join(CPU_BF16_FLAGS)}, so bf16 would be "
                     "emulated (slower than float32)")


def _device_kind(strategy: tf.distribute.Strategy) -> str:
    if isinstance(strategy, (tf.distribute.TPUStrategy, tf.distribute.experimental.TPUStrategy)):
        return "tpu"
    try:
        devices = strategy.extended.worker_devices
    except RuntimeError:
        # The default strategy: ops go where TensorFlow places them, a GPU if there is one.
        return "gpu" if tf.config.list_logical_devices("GPU") else "cpu"
    return "gpu" if any("GPU" in device.upper() for device in devices) else "cpu"


def _slowest_gpu_capability() -> tuple[int, int] | None:
    capabilities = []
    for gpu in tf.config.list_physical_devices("GPU"):
        capability = tf.config.experimental.get_device_details(gpu).get("compute_capability")
        if capability is None:
            return None
        capabilities.append(tuple(capability))
    return min(capabilities) if capabilities else None


def resolve(precision: str, strategy: tf.distribute.Strategy) -> str:
    """`precision` itself, or for `auto` the policy this process's hardware computes fastest.

    Args:
      precision: a `runtime.mixed_precision` value.
      strategy: the run's strategy (it says whether replicas run on TPU, GPU or CPU).
    """
    if precision != AUTO:
        return precision
    workers = strategies.num_workers(strategy)
    if workers > 1:
        # Each worker would choose by its own hardware; replicas of one run must agree
        # (a float16 worker scales its loss, a bf16 one does not, and gradients are summed).
        raise ValueError(f"runtime.mixed_precision=auto cannot be used by a run of {workers} "
                         f"workers, which may differ in hardware: set one of "
                         f"{FLOAT32}, {BFLOAT16}, {FLOAT16}")
    device = _device_kind(strategy)
    chosen, reason = choose_precision(
        device, cpu_flags() if device == "cpu" else frozenset(),
        _slowest_gpu_capability() if device == "gpu" else None)
    logging.info("runtime.mixed_precision=auto chose %s: %s", chosen, reason)
    return chosen


def resolve_experiment(experiment, strategy: tf.distribute.Strategy):
    """`experiment` with `runtime.mixed_precision` resolved (see `resolve`).

    Args:
      experiment: an experiment dataclass with a `runtime` (`RuntimeConfig`) section.
      strategy: the strategy the model is built under.

    Returns:
      `experiment` itself when its policy is not `auto`, else a copy with
      the chosen policy.
    """
    runtime = experiment.runtime
    chosen = resolve(runtime.mixed_precision, strategy)
    if chosen == runtime.mixed_precision:
        return experiment
    return dataclasses.replace(experiment,
                               runtime=dataclasses.replace(runtime, mixed_precision=chosen))


def model_dtype(policy: str) -> str | None:
    """The `dtype` for `Task.build_model` under a resolved policy: None for float32.

    Args:
      policy: `float32`, `mixed_bfloat16` or `mixed_float16` (not `auto`).

    Raises:
      ValueError: `policy` is `auto`, which `resolve_experiment` must replace first.
    """
    if policy == AUTO:
        raise ValueError("runtime.mixed_precision=auto must be resolved before the model is "
                         "built (precision.resolve_experiment)")
    return None if policy == FLOAT32 else policy
