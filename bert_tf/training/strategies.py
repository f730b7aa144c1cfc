"""Choosing and building the `tf.distribute` strategy for a run.

    auto         a TPU if one is reachable, else all local GPUs, else the CPU
    cpu          the default strategy on the CPU
    one_device   `OneDeviceStrategy` on the first GPU, else the CPU
    mirrored     `MirroredStrategy` over the local GPUs, or over
                 `runtime.logical_cpu_devices` logical CPU devices
    multi_worker `MultiWorkerMirroredStrategy`; the cluster comes from `TF_CONFIG`
    tpu          `TPUStrategy` on `--tpu` (a name, `grpc://` address or "local")
"""

import json
import logging
import os

import tensorflow as tf

from bert_tf.training import lost_workers
from bert_tf.training.strategy_names import STRATEGIES


def split_cpu(num_devices):
    """Splits the physical CPU into `num_devices` logical devices.

    Must run before TensorFlow initialises its devices (before any op).
    Lets `MirroredStrategy` run several replicas on a CPU-only machine, which
    is how the multi-replica logic is tested here.
    """
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(num_devices)])


def choose_strategy(name, tpu_address="", num_gpus=None, tf_config=None):
    """Resolves `auto` to a concrete strategy name (pure, for testing).

    Args:
      name: one of `STRATEGIES`.
      tpu_address: the `--tpu` flag; with `auto`, a non-empty address (or a
        `TPU_NAME` environment variable) selects the TPU.
      num_gpus: visible GPUs (queried when None).
      tf_config: the `TF_CONFIG` JSON string (read from the environment when None).
    """
    if name not in STRATEGIES:
        raise ValueError(f"--strategy must be one of {STRATEGIES}, got {name!r}")
    if name != "auto":
        return name
    if tpu_address or os.environ.get("TPU_NAME"):
        return "tpu"
    tf_config = os.environ.get("TF_CONFIG", "") if tf_config is None else tf_config
    if tf_config and len(_cluster_workers(tf_config)) > 1:
        return "multi_worker"
    num_gpus = len(tf.config.list_physical_devices("GPU")) if num_gpus is None else num_gpus
    if num_gpus > 1:
        return "mirrored"
    return "one_device" if num_gpus == 1 else "cpu"


def _cluster_workers(tf_config):
    try:
        cluster = json.loads(tf_config).get("cluster", {})
    except (ValueError, AttributeError) as e:
        raise ValueError(f"TF_CONFIG is not valid JSON with a 'cluster' mapping: {e}") from e
    return cluster.get("worker", []) + cluster.get("chief", [])


def create_strategy(name, tpu_address="", logical_cpu_devices=0, worker_timeout_seconds=10):
    """Builds the strategy `name` (after `choose_strategy`) for this process.

    Args:
      name: one of `STRATEGIES`.
      tpu_address: the `--tpu` flag (see `choose_strategy`).
      logical_cpu_devices: the logical CPU devices `split_cpu` made (0: none).
      worker_timeout_seconds: `multi_worker` only: how long a worker's heartbeats may
        stop before the others stop (see `lost_workers`).
    """
    name = choose_strategy(name, tpu_address)
    logging.info("distribution strategy: %s", name)
    if name == "tpu":
        return _tpu_strategy(tpu_address or os.environ.get("TPU_NAME", "") or "local")
    if name == "multi_worker":
        if not os.environ.get("TF_CONFIG"):
            raise ValueError("--strategy=multi_worker needs TF_CONFIG describing the cluster "
                             "(see README: Strategies)")
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        lost_workers.configure_heartbeat_timeout(worker_timeout_seconds,
                                                 resolver.cluster_spec(), resolver.task_type)
        logging.info("a worker whose heartbeats stop for %gs stops the others "
                     "(runtime.worker_timeout_seconds)", worker_timeout_seconds)
        return tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
    gpus = [d.name for d in tf.config.list_logical_devices("GPU")]
    if name == "mirrored":
        if gpus:
            logging.info("MirroredStrategy over devices %s", ", ".join(gpus))
            return tf.distribute.MirroredStrategy(gpus)
        cpus = [d.name for d in tf.config.list_logical_devices("CPU")]
        if logical_cpu_devices and len(cpus) != logical_cpu_devices:
            raise RuntimeError(f"expected {logical_cpu_devices} logical CPU devices, found "
                               f"{len(cpus)}: split_cpu() must run before TensorFlow starts")
        logging.info("MirroredStrategy over devices %s", ", ".join(cpus))
        return tf.distribute.MirroredStrategy(cpus)
    if name == "one_device":
        return tf.distribute.OneDeviceStrategy(gpus[0] if gpus else "/cpu:0")
    return tf.distribute.get_strategy()


def _tpu_strategy(address):
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=address)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, RuntimeError, tf.errors.OpError) as e:
        # TensorFlow's message is a multi-line kernel dump; the first line says why.
        logging.debug("TPU initialisation failed", exc_info=True)
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        reason = reason.split(". Failed in initialization")[0]
        raise RuntimeError(f"--strategy=tpu: cannot reach a TPU at {address!r} ({reason}); "
                           "pass --tpu NAME or grpc://ADDRESS of a reachable TPU") from None
    return tf.distribute.TPUStrategy(resolver)


def default_jit_compile(strategy):
    """XLA where it helps: on for TPUs and GPUs, off on CPUs (slower there)."""
    if isinstance(strategy, tf.distribute.TPUStrategy):
        return True
    return bool(tf.config.list_logical_devices("GPU"))


def is_chief(strategy):
    """Whether this process writes checkpoints, summaries and logs for the run."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    if task_type in (None, "chief"):
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return task_type == "worker" and task_id == 0 and not has_chief


def num_workers(strategy):
    """Machines (processes) of the run: 1 without a cluster."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return 1
    cluster = resolver.cluster_spec().as_dict()
    return max(len(cluster.get("worker", [])) + len(cluster.get("chief", [])), 1)


def worker_id(strategy):
    """This worker's index in the cluster (0 without a cluster)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return 0
    return int(resolver.task_id or 0)


def local_replica_count(strategy):
    """Replicas on this worker (the default strategy has one and no device list)."""
    try:
        return len(strategy.extended.worker_devices)
    except RuntimeError:
        return 1


def worker_iterator(strategy, input_distribution, dataset_fn):
    """A plain tf.data iterator over this worker's batches.

    Plain iterators are checkpointable on every strategy (TensorFlow's
    multi-device distributed iterators are not); `TrainStep` hands their
    batches to the replicas.

    Args:
      strategy: the run's strategy.
      input_distribution: `trainer.input_distribution`: "per_worker" (one
        pipeline per worker, each on its own share) or "global" (every worker
        runs the single-process pipeline).
      dataset_fn: `InputContext or None -> tf.data.Dataset` (None: "global").
    """
    if input_distribution == "global":
        return iter(dataset_fn(None))
    local_replicas = local_replica_count(strategy)
    return iter(dataset_fn(tf.distribute.InputContext(
        num_input_pipelines=strategy.num_replicas_in_sync // local_replicas,
        input_pipeline_id=worker_id(strategy),
        num_replicas_in_sync=strategy.num_replicas_in_sync)))
