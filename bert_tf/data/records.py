"""The original BERT pretraining TFRecord format: writing, validating and reading.

Each record is a `tf.train.Example` as google-research/bert's
`create_pretraining_data.py` writes it:

    input_ids, input_mask, segment_ids        int64 [S]
    masked_lm_positions, masked_lm_ids        int64 [P]
    masked_lm_weights                         float [P]
    next_sentence_labels                      int64 [1]   (0 IsNext, 1 NotNext)

so shards made by Google's tool train here unchanged. Reading casts the
integer features to int32 and `next_sentence_labels` to a scalar; files
written without NSP simply lack that feature.

Damaged files fail with an error naming the file, never silently and never
by hanging:

* a pattern matching nothing or a missing file: `FileNotFoundError`, eagerly;
* `validate=True` (the default) walks every file's record framing before
  training (lengths and length checksums only, no payload read, so it costs a
  seek per record): a truncated file, a file that is not a TFRecord file or
  whose first record is not a pretraining example of the expected shape
  raises `CorruptRecordError` naming the file and byte offset. TensorFlow's
  own reader would either stop silently (a file cut inside a record header
  reads as a shorter, valid file) or fail without naming the file;
* a record whose payload checksum fails is only seen when read: the reader
  of each file stops at it, and the count of records read is checked against
  the count found by the validation, so iteration fails with an
  `InvalidArgumentError` naming the file (`file_damage`). So does a file cut or
  overwritten after the validation, while it is read.
"""

import dataclasses
import mmap
import struct

import numpy as np
import tensorflow as tf

from bert_tf import storage
from bert_tf.data import file_damage
from bert_tf.data import packing as packing_lib
from bert_tf.file_patterns import expand_file_patterns

FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions",
                 "masked_lm_ids", "masked_lm_weights", "next_sentence_labels")
_SEQUENCE_FEATURES = ("input_ids", "input_mask", "segment_ids")
_PREDICTION_FEATURES = ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")

# TFRecord framing: uint64 length, uint32 masked crc32c(length), data, uint32 masked crc32c(data).
_HEADER = struct.Struct("<QI")
_FOOTER_SIZE = 4


class CorruptRecordError(ValueError):
    """A TFRecord file is damaged or does not hold BERT pretraining examples."""

    def __init__(self, path, offset, reason):
        super().__init__(f"{path}: {reason} (at byte {offset})")
        self.path = path
        self.offset = offset


def _crc32c_table():
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
        table.append(crc)
    return table


_CRC32C_TABLE = _crc32c_table()


def _masked_crc32c(data):
    """TFRecord's masked CRC-32C (Castagnoli); pure Python, for short inputs."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC32C_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def list_record_files(file_patterns):
    """Expands TFRecord file patterns; see `bert_tf.file_patterns.expand_file_patterns`."""
    return expand_file_patterns(file_patterns, kind="TFRecord")


def scan_record_file(path):
    """Walks the record framing of one TFRecord file without reading the payloads.

    Checks every length checksum and that the file ends exactly after its
    last record.

    Returns:
      (number of records, the first record's bytes or None for an empty file).

    Raises:
      CorruptRecordError: the framing is broken; names the file and offset.
    """
    if not storage.has_scheme(path) and storage.isfile(path):
        size = storage.getsize(path)
        if size == 0:
            return 0, None  # A valid TFRecord file without records.
        # mmap turns the per-record reads and seeks into memory accesses.
        with storage.open(path, "rb") as local, \
                mmap.mmap(local.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return _walk(path, data, size)
    with tf.io.gfile.GFile(path, "rb") as remote:  # e.g. gs://
        return _walk(path, remote, remote.size())


def _walk(path, data, size):
    """Follows the record lengths through `data` (a file-like object with read/seek)."""
    offset = 0
    count = 0
    first = None
    while offset < size:
        if offset + _HEADER.size > size:
            raise CorruptRecordError(path, offset, "truncated TFRecord file: partial record header")
        data.seek(offset)
        header = data.read(_HEADER.size)
        length, length_crc = _HEADER.unpack(header)
        if _masked_crc32c(header[:8]) != length_crc:
            hint = " (is this a TFRecord file?)" if count == 0 else ""
            raise CorruptRecordError(path, offset, f"corrupt record header{hint}")
        end = offset + _HEADER.size + length + _FOOTER_SIZE
        if end > size:
            raise CorruptRecordError(
                path, offset, f"truncated TFRecord file: record {count} needs {end - size} "
                f"more bytes")
        if first is None:
            first = data.read(length)
            (data_crc,) = struct.unpack("<I", data.read(_FOOTER_SIZE))
            if _masked_crc32c(first) != data_crc:
                raise CorruptRecordError(path, offset, "corrupt record 0 (bad data checksum)")
        offset = end
        count += 1
    return count, first


def record_shapes(serialized, path="<record>"):
    """(max_seq_length, max_predictions_per_seq, has_nsp) of a serialized pretraining example.

    Raises:
      CorruptRecordError: not a `tf.train.Example`, or features missing or of
        inconsistent lengths; the message names `path`.
    """
    try:
        example = tf.train.Example.FromString(serialized)
    except Exception as error:  # protobuf's DecodeError type varies by backend
        raise CorruptRecordError(
            path, 0, f"record 0 is not a tf.train.Example ({error})") from None
    features = example.features.feature
    missing = [name for name in FEATURE_NAMES[:-1] if name not in features]
    if missing:
        raise CorruptRecordError(
            path, 0, f"record 0 is not a BERT pretraining example: missing {missing}")

    def length(name):
        feature = features[name]
        kind = "float_list" if name == "masked_lm_weights" else "int64_list"
        if feature.WhichOneof("kind") != kind:
            raise CorruptRecordError(path, 0, f"feature {name} should be a {kind}")
        return len(getattr(feature, kind).value)

    seq = {length(name) for name in _SEQUENCE_FEATURES}
    pred = {length(name) for name in _PREDICTION_FEATURES}
    if len(seq) != 1 or len(pred) != 1:
        raise CorruptRecordError(path, 0, "record 0 has features of inconsistent lengths")
    has_nsp = "next_sentence_labels" in features
    if has_nsp and length("next_sentence_labels") != 1:
        raise CorruptRecordError(path, 0, "next_sentence_labels should hold one value")
    return seq.pop(), pred.pop(), has_nsp


def feature_spec(max_seq_length, max_predictions_per_seq, nsp=True):
    """The `tf.io.parse_example` spec of the format."""
    spec = {name: tf.io.FixedLenFeature([max_seq_length], tf.int64)
            for name in _SEQUENCE_FEATURES}
    spec["masked_lm_positions"] = tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64)
    spec["masked_lm_ids"] = tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64)
    spec["masked_lm_weights"] = tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32)
    if nsp:
        spec["next_sentence_labels"] = tf.io.FixedLenFeature([1], tf.int64)
    return spec


def parse_pretraining_examples(serialized, max_seq_length, max_predictions_per_seq, nsp=True):
    """Parses serialized examples (scalar or [B]) into int32/float32 features.

    `next_sentence_labels` comes out as [] (or [B]), the other features as
    [S]/[P] (or [B, S]/[B, P]).
    """
    spec = feature_spec(max_seq_length, max_predictions_per_seq, nsp)
    features = tf.io.parse_example(serialized, spec)
    parsed = {}
    for name in FEATURE_NAMES:
        if name not in features:
            continue
        value = features[name]
        if name == "next_sentence_labels":
            value = value[..., 0]
        parsed[name] = value if value.dtype == tf.float32 else tf.cast(value, tf.int32)
    return parsed


def serialize_pretraining_example(features):
    """A `tf.train.Example` byte string from one example's features (numpy or lists).

    Integer features are written as int64 lists and `masked_lm_weights` as a
    float list, as google-research/bert writes them; `next_sentence_labels`
    (a scalar or a 1-element array) is optional.
    """
    feature = {}
    for name in FEATURE_NAMES:
        if name not in features:
            if name == "next_sentence_labels":
                continue
            raise ValueError(f"example lacks the feature {name!r}")
        values = np.asarray(features[name]).reshape(-1)
        if name == "masked_lm_weights":
            feature[name] = tf.train.Feature(
                float_list=tf.train.FloatList(value=values.astype(np.float32).tolist()))
        else:
            feature[name] = tf.train.Feature(
                int64_list=tf.train.Int64List(value=values.astype(np.int64).tolist()))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


class PretrainingRecordWriter:
    """Writes examples round-robin over a fixed list of TFRecord files.

    Use as a context manager; `write(features)` takes one example's features
    as numpy arrays (see `serialize_pretraining_example`). `counts` holds the
    number of examples written to each file.
    """

    def __init__(self, output_files):
        if not output_files:
            raise ValueError("PretrainingRecordWriter needs at least one output file")
        self.output_files = list(output_files)
        self._writers = [tf.io.TFRecordWriter(path) for path in self.output_files]
        self.counts = [0] * len(self._writers)
        self._next = 0

    def write(self, features):
        """Appends one example to the next file in turn."""
        self.write_serialized(serialize_pretraining_example(features))

    def write_serialized(self, record):
        """Appends one already serialized example to the next file in turn."""
        self._writers[self._next].write(record)
        self.counts[self._next] += 1
        self._next = (self._next + 1) % len(self._writers)

    def close(self):
        for writer in self._writers:
            writer.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


def _checked_file_records(filename, expected_count):
    """The records of one file; fails naming it if fewer than `expected_count` are read.

    TensorFlow's reader raises on a damaged record without naming the file;
    `ignore_errors` makes the reader stop the file there instead (it moves to
    the next file on a data-loss error), and a sentinel element at the end
    checks the count, with the file name in the assertion message.
    """
    records = tf.data.TFRecordDataset(filename).ignore_errors(log_warning=True)
    flagged = records.map(lambda record: (record, True)).concatenate(
        tf.data.Dataset.from_tensors((tf.constant(b"", tf.string), False)))

    def count(number_read, element):
        record, is_record = element
        number_read += tf.cast(is_record, tf.int64)
        check = file_damage.assert_intact(
            is_record | tf.equal(number_read, expected_count), file_damage.TFRECORD, filename,
            "is a corrupt TFRecord file: a damaged or cut record (bad checksum, or the file "
            "ends inside it) ended it after", number_read, "of", expected_count, "records")
        with tf.control_dependencies([check]):
            return number_read, (tf.identity(record), is_record)

    checked = flagged.scan(tf.constant(0, tf.int64), count)
    return checked.filter(lambda record, is_record: is_record).map(
        lambda record, is_record: record)


@dataclasses.dataclass(frozen=True)
class RecordShapes:
    """The shapes every example of a set of record files has.

    Attributes:
      max_seq_length: S, the length of `input_ids` and its siblings.
      max_predictions_per_seq: P, the length of the `masked_lm_*` features.
      nsp: whether `next_sentence_labels` is present.
    A None field is unknown: read from the files' first records.
    """

    max_seq_length: int | None = None
    max_predictions_per_seq: int | None = None
    nsp: bool | None = None


def check_record_files(files: list[str], expected: RecordShapes,
                       validate: bool = True) -> tuple[list[int] | None, RecordShapes]:
    """The record counts of `files` and the shapes of their examples, every one known.

    With `validate`, every file's framing is walked (`scan_record_file`) and its
    first record's shapes must equal the given ones and every other file's.

    Args:
      files: the record files, in reading order.
      expected: the shapes the caller expects (None fields are read from the files).
      validate: check the files; without it, S and P must be given.

    Returns:
      (records per file, or None without validation; the shapes, with NSP
      assumed when neither given nor read).

    Raises:
      CorruptRecordError: a file fails validation, or all files are empty.
      ValueError: S or P unknown without validation.
    """
    if not validate:
        if expected.max_seq_length is None or expected.max_predictions_per_seq is None:
            raise ValueError("max_seq_length and max_predictions_per_seq are required "
                             "when validate=False")
        nsp = True if expected.nsp is None else expected.nsp
        return None, dataclasses.replace(expected, nsp=nsp)
    counts, shapes = [], None
    given = dataclasses.astuple(expected)
    for path in files:
        count, first = scan_record_file(path)
        counts.append(count)
        if first is None:
            continue
        file_shapes = record_shapes(first, path)
        for value, found, field in zip(given, file_shapes, dataclasses.fields(RecordShapes)):
            if value is not None and value != found:
                raise CorruptRecordError(
                    path, 0, f"holds examples with {field.name}={found}, expected {value}")
        if shapes is not None and file_shapes != shapes:
            raise CorruptRecordError(
                path, 0, f"holds examples of shape {file_shapes} (max_seq_length, "
                f"max_predictions_per_seq, nsp) but {files[0]} has {shapes}")
        shapes = file_shapes
    if shapes is None:
        raise CorruptRecordError(files[0], 0, f"all {len(files)} TFRecord files are empty")
    return counts, RecordShapes(*shapes)


def read_pretraining_records(file_patterns, *, batch_size=None, max_seq_length=None,
                             max_predictions_per_seq=None, nsp=None, input_context=None,
                             shuffle_files=False, shuffle_buffer_size=0, seed=0,
                             num_epochs=1, drop_remainder=True, cycle_length=8,
                             validate=True, packing=None,
                             num_parallel_calls=tf.data.AUTOTUNE):
    """A `tf.data.Dataset` of pretraining features read from BERT TFRecord files.

    Args:
      file_patterns: glob pattern(s) of the TFRecord files.
      batch_size: global batch size (divided by the replicas of `input_context`);
        None yields single examples.
      max_seq_length, max_predictions_per_seq, nsp: the expected shapes and
        whether `next_sentence_labels` is present; None reads them from the
        first record (requires `validate=True`). Given values are checked
        against every file's first record when validating.
      input_context: optional `tf.distribute.InputContext`; pipeline i reads
        files i, i + n, ... (there must be at least as many files as pipelines).
      shuffle_files: shuffle the file order (seeded, anew each epoch).
      shuffle_buffer_size: seeded example shuffle buffer (0: no shuffle).
      seed: seed of both shuffles.
      num_epochs: passes over the files; None repeats forever.
      drop_remainder: drop the last partial batch.
      cycle_length: files read at once (deterministic interleave).
      validate: check the framing of every file eagerly and the record
        counts in graph (see the module docstring).
      packing: a `bert_tf.data.packing.PackingOptions` to pack several
        examples per row (rows then carry K * P predictions and per-slot
        NSP features; `batch_size` counts rows), or None.
      num_parallel_calls: parallelism of reading and parsing.

    Returns:
      Dicts of int32 `input_ids`, `input_mask`, `segment_ids` [B, S],
      `masked_lm_positions`, `masked_lm_ids` [B, P], float32
      `masked_lm_weights` [B, P] and int32 `next_sentence_labels` [B].

    Raises:
      FileNotFoundError: a pattern matches no file.
      CorruptRecordError: a file fails validation, or all files are empty.
      ValueError: fewer files than input pipelines, or shapes unknown without validation.
    """
    files = list_record_files(file_patterns)
    counts, shapes = check_record_files(
        files, RecordShapes(max_seq_length, max_predictions_per_seq, nsp), validate)
    pipelines = input_context.num_input_pipelines if input_context is not None else 1
    if len(files) < pipelines:
        raise ValueError(f"{len(files)} TFRecord files cannot be split over "
                         f"{pipelines} input pipelines")
    records = _records(files, counts, input_context, shuffle_files=shuffle_files, seed=seed,
                       num_epochs=num_epochs, cycle_length=cycle_length,
                       num_parallel_calls=num_parallel_calls)
    if shuffle_buffer_size > 1:
        records = records.shuffle(shuffle_buffer_size, seed=seed)

    def parse(serialized):
        return parse_pretraining_examples(serialized, shapes.max_seq_length,
                                          shapes.max_predictions_per_seq, shapes.nsp)

    per_replica = (input_context.get_per_replica_batch_size(batch_size)
                   if input_context is not None and batch_size is not None else batch_size)
    if packing is not None:
        # The records' masking rate is unknown here: K * P always holds the row's predictions.
        rows = packing_lib.pack_examples(
            records.map(parse, num_parallel_calls=num_parallel_calls), packing,
            shapes.max_seq_length, packing.max_sequences_per_row * shapes.max_predictions_per_seq)
        if per_replica is not None:
            rows = rows.batch(per_replica, drop_remainder=drop_remainder)
        return rows.prefetch(tf.data.AUTOTUNE)
    if batch_size is None:
        return records.map(parse, num_parallel_calls=num_parallel_calls).prefetch(
            tf.data.AUTOTUNE)
    # Parsing a whole batch at once is much cheaper than example by example.
    records = records.batch(per_replica, drop_remainder=drop_remainder)
    return records.map(parse, num_parallel_calls=num_parallel_calls).prefetch(
        tf.data.AUTOTUNE)


def _records(files, counts, input_context, *, shuffle_files, seed, num_epochs, cycle_length,
             num_parallel_calls):
    """The serialized records of this input pipeline's files, interleaved, over the epochs.

    `counts` (records per file, or None) makes each file's reader check it read them all.
    """
    expected_counts = np.array(counts if counts is not None else [-1] * len(files), np.int64)
    dataset = tf.data.Dataset.from_tensor_slices((files, expected_counts))
    if input_context is not None and input_context.num_input_pipelines > 1:
        dataset = dataset.shard(input_context.num_input_pipelines,
                                input_context.input_pipeline_id)
    if shuffle_files:
        dataset = dataset.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    dataset = dataset.repeat(num_epochs)

    def file_records(filename, expected_count):
        if counts is None:
            return tf.data.TFRecordDataset(filename)
        return _checked_file_records(filename, expected_count)

    return dataset.interleave(
        file_records, cycle_length=min(cycle_length, len(files)),
        num_parallel_calls=num_parallel_calls, deterministic=True)
