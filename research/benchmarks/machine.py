"""What a benchmark records about the machine it ran on.

The CPU model changes between sessions and the machines are shared, so every
record says which CPU it ran on and how loaded the machine was: timings are
compared only within one record.
"""

import os
import platform


def _cpuinfo_fields():
    """The first processor's fields of /proc/cpuinfo ({} where there is none)."""
    fields = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break  # the end of the first processor's block
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        pass
    return fields


def describe() -> dict:
    """`{"cpu", "cpu_family", "cpu_model", "cpus", "load_average"}` of this machine now.

    `cpu` is the model name (virtual machines often report only "AMD EPYC"); the
    family and model numbers tell the generation apart (AMD family 25 model 17: Zen 4).
    """
    fields = _cpuinfo_fields()
    return {"cpu": fields.get("model name") or platform.processor(),
            "cpu_family": fields.get("cpu family", ""), "cpu_model": fields.get("model", ""),
            "cpus": os.cpu_count(), "load_average": round(os.getloadavg()[0], 2)}
