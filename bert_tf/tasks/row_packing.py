"""The packing keys of both task families: one name, one meaning, one default.

`data.max_sequences_per_row` is the most sequences one training row holds:
pretraining instances or fine-tuning examples, each still encoded as if alone
(`bert_tf.data.packing`). The default, 1, keeps one sequence per row in both
families; the packaged pretraining configs set 3. `data.packing_window` is
how many sequences are assigned to rows at a time (first-fit within it).
"""

from typing import Protocol

from bert_tf import config as config_lib
from bert_tf.data import packing

KEY = "data.max_sequences_per_row"
# One sequence per row: no packing unless a config asks for it.
DEFAULT_MAX_SEQUENCES_PER_ROW = 1
DEFAULT_WINDOW = packing.PackingOptions().window

# The keys the two families used before they shared one (`bert_tf.config.retired_keys`).
RETIRED_KEYS = {
    "packing": ("max_sequences_per_row",
                "1: one sequence per row; more packs rows, e.g. 3 as the pretraining "
                "configs do"),
    "max_examples_per_row": ("max_sequences_per_row",
                             "the same count, for pretraining and fine-tuning alike; "
                             "1: one example per row"),
}


@config_lib.recorded_upgrade
def _packing_keys_of_earlier_versions(values):
    """A recorded config with the retired packing keys as `data.max_sequences_per_row`.

    Earlier versions recorded a switch, `data.packing`, beside a count:
    `data.max_sequences_per_row` in pretraining, `data.max_examples_per_row` in
    fine-tuning. The count applied only with the switch on.
    """
    data = values.get("data") if isinstance(values, dict) else None
    if not isinstance(data, dict) or not set(RETIRED_KEYS) & set(data):
        return values
    data = dict(data)
    switch = data.pop("packing", True)
    count = data.pop("max_examples_per_row", data.get("max_sequences_per_row",
                                                     DEFAULT_MAX_SEQUENCES_PER_ROW))
    data["max_sequences_per_row"] = int(count) if switch else 1
    return {**values, "data": data}


class PackedRowsData(Protocol):
    """A data config with the packing keys (pretraining and fine-tuning data sections)."""

    max_sequences_per_row: int
    packing_window: int


def is_packed(data: PackedRowsData) -> bool:
    """Whether training rows may hold more than one sequence.

    Args:
      data: the run's data config.
    """
    return data.max_sequences_per_row > 1


def packing_options(data: PackedRowsData) -> packing.PackingOptions | None:
    """The pipeline's `PackingOptions`, or None for one sequence per row.

    Args:
      data: the run's data config.
    """
    if not is_packed(data):
        return None
    return packing.PackingOptions(max_sequences_per_row=data.max_sequences_per_row,
                                  window=data.packing_window)


def check(data: PackedRowsData) -> None:
    """Raises ValueError naming the key when the packing keys are out of range.

    Args:
      data: the run's data config.
    """
    if not 1 <= data.max_sequences_per_row <= max(data.packing_window, 1):
        raise ValueError(f"{KEY} must be in [1, data.packing_window={data.packing_window}] "
                         f"(1: one sequence per row), got {data.max_sequences_per_row}")
