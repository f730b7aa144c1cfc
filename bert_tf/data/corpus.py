"""Readers for pretraining corpora in the original BERT text format.

The format (google-research/bert `create_pretraining_data.py`): plain UTF-8
text, one sentence per line, documents separated by blank lines. Here every
line is stripped of surrounding whitespace, so a line holding only spaces also
separates documents, and the end of a file always ends a document (documents
never continue into the next file). A line that is not UTF-8 text (garbage
bytes, a NUL byte) fails the pipeline with an error naming the file and line.

`document_dataset` turns a list of file patterns into a `tf.data.Dataset`
whose elements are documents: 1-D `tf.string` tensors holding that document's
sentences, in order. Lines are streamed (memory is bounded by the largest
document plus a batch of lines, not by the file), grouped into documents in
graph with `tf.data.Dataset.scan`, and several files are read at once with a
deterministic `interleave`, so the element order depends only on the file list,
`cycle_length`, `block_length` and the input pipeline, never on timing.
"""

import logging

import tensorflow as tf

from bert_tf.data import file_damage
from bert_tf.file_patterns import expand_file_patterns


def list_files(file_patterns):
    """Expands corpus file patterns; see `bert_tf.file_patterns.expand_file_patterns`."""
    return expand_file_patterns(file_patterns, kind="corpus")


def has_text(path, chunk_size=1 << 16):
    """True when `path` holds a non-whitespace byte.

    Reads only up to the first such byte, so it costs nothing on a real
    corpus file.
    """
    with tf.io.gfile.GFile(path, "rb") as f:
        while True:
            chunk = f.read(chunk_size)
            if not chunk:
                return False
            if chunk.strip():
                return True


def check_corpus_has_text(files):
    """Raises ValueError when no file has text; warns about each empty file.

    An empty corpus would otherwise train on nothing without a word; a single
    empty shard among many is tolerated (its documents are simply absent).
    """
    empty = [path for path in files if not has_text(path)]
    if len(empty) == len(files):
        raise ValueError(
            f"the corpus is empty: no non-blank line in {empty[:5]}"
            f"{' ...' if len(empty) > 5 else ''}; expected one sentence per line "
            "with blank lines between documents")
    for path in empty:
        logging.warning("corpus file %s is empty; it contributes no documents", path)


def document_dataset(
    file_patterns,
    input_context=None,
    cycle_length=4,
    block_length=1,
    shuffle_files=False,
    seed=0,
    num_parallel_calls=tf.data.AUTOTUNE,
):
    """A dataset of the documents in corpus files (BERT one-sentence-per-line format).

    Each element is a 1-D `tf.string` tensor (shape `[None]`) holding one
    document's sentences, stripped of surrounding whitespace. Documents without
    any non-blank line are skipped.

    Sharding across input pipelines (`input_context`, as passed by
    `tf.distribute.Strategy.distribute_datasets_from_function`): when there are
    at least as many files as pipelines, pipeline `i` reads files
    `i, i + n, i + 2n, ...` of the sorted file list (sharding by file: no
    pipeline reads bytes it drops). With fewer files than pipelines every
    pipeline reads all files and keeps documents `i, i + n, ...` of the
    combined stream (sharding by element), so no pipeline is left empty.
    Either way each document is seen by exactly one pipeline.

    Args:
      file_patterns: a glob pattern or a list of them (see `list_files`).
      input_context: optional `tf.distribute.InputContext`.
      cycle_length: how many files are read at once; the interleaved order of
        documents depends on it, so keep it fixed for reproducible runs.
        Clipped to the number of files.
      block_length: consecutive documents taken from one file before moving to
        the next file of the cycle.
      shuffle_files: shuffle the order in which files are read, anew on every
        pass over the dataset, from `seed` (same seed, same orders).
      seed: the seed of the file shuffle.
      num_parallel_calls: parallelism of the interleave. The order stays
        deterministic whatever the value.

    Returns:
      A `tf.data.Dataset` of `tf.string` tensors of shape `[None]`.

    Raises:
      ValueError: a pattern matches no file, or no file holds text (both
        raised here, not at iteration time), or `cycle_length`/`block_length`
        is not a positive integer.
    """
    for name, value in (("cycle_length", cycle_length), ("block_length", block_length)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    files = list_files(file_patterns)
    check_corpus_has_text(files)

    num_pipelines = 1
    pipeline_id = 0
    if input_context is not None:
        num_pipelines = input_context.num_input_pipelines
        pipeline_id = input_context.input_pipeline_id
    shard_by_file = num_pipelines > 1 and len(files) >= num_pipelines
    shard_by_element = num_pipelines > 1 and not shard_by_file
    if shard_by_file:
        files = files[pipeline_id::num_pipelines]

    file_dataset = tf.data.Dataset.from_tensor_slices(files)
    if shuffle_files:
        # A seeded in-graph shuffle gives a new, reproducible file order per
        # epoch; with element sharding every pipeline draws the same order, so
        # the element-level shard stays a partition of the documents.
        file_dataset = file_dataset.shuffle(
            len(files), seed=seed, reshuffle_each_iteration=True
        )
    documents = file_dataset.interleave(
        file_documents,
        cycle_length=min(cycle_length, len(files)),
        block_length=block_length,
        num_parallel_calls=num_parallel_calls,
        deterministic=True,
    )
    if shard_by_element:
        documents = documents.shard(num_pipelines, pipeline_id)
    return documents


def holdout_split(documents, every, held_out):
    """One side of a deterministic split of a document dataset.

    Document `i` of the stream is held out when `i % every == 0`, so about
    1/`every` of the documents form the held-out side (`held_out=True`, e.g.
    for evaluation) and the rest the other side. The two sides never share a
    document.
    """
    if not isinstance(every, int) or every < 2:
        raise ValueError(f"holdout every must be an integer >= 2, got {every!r}")

    def on_this_side(index, document):
        del document
        return tf.equal(tf.equal(index % every, 0), held_out)

    return documents.enumerate().filter(on_this_side).map(lambda index, document: document)


def file_documents(filename):
    """A dataset of the documents in one corpus file (a scalar `tf.string` path).

    Lines are streamed with `TextLineDataset` in batches of
    `_LINES_PER_BATCH`. A `scan` over the batches splits each batch at its
    blank lines with vectorized ops, releases the documents it completes and
    carries the unfinished last one into the next batch. A final batch holding
    one blank line releases the file's last document. A line that is not UTF-8
    text fails the pipeline naming the file and line (`_checked_text`).
    """
    batches = (
        tf.data.TextLineDataset(filename)
        .batch(_LINES_PER_BATCH)
        .enumerate()
        .map(lambda index, lines: _checked_text(filename, index, lines))
        .concatenate(tf.data.Dataset.from_tensors(tf.constant([""], tf.string)))
    )
    released = batches.scan(tf.zeros([0], tf.string), _split_batch)
    return released.flat_map(_documents_of_batch).map(_as_dense)


def _checked_text(filename, batch_index, lines):
    """`lines` (batch `batch_index` of `filename`), or an error naming the first bad line.

    A corpus is UTF-8 text: a line with bytes that are not UTF-8, or with a NUL
    byte (what a file overwritten with binary data, or zero-filled by a crash,
    holds), stops the pipeline with one message naming the file and the line
    (`file_damage`) rather than training on garbage. (The tokenizer alone
    would drop such bytes, as BERT's `convert_to_unicode` does.)
    """
    # Transcoding valid UTF-8 changes nothing; an invalid sequence becomes U+FFFD.
    valid = tf.equal(tf.strings.unicode_transcode(
        lines, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD), lines)
    text = valid & tf.logical_not(tf.strings.regex_full_match(lines, "(?s).*\\x00.*"))
    first_bad = tf.argmin(tf.cast(text, tf.int32), output_type=tf.int64)
    check = file_damage.assert_intact(
        tf.reduce_all(text), file_damage.TEXT, filename, "line",
        batch_index * _LINES_PER_BATCH + first_bad + 1,
        "is not UTF-8 text (invalid UTF-8 or a NUL byte)")
    with tf.control_dependencies([check]):
        return tf.identity(lines)


# Lines grouped per scan step. Per-line steps cost a function call per line
# (about 6x slower on Moby-Dick); a batch bounds memory just as well.
_LINES_PER_BATCH = 1024


def _split_batch(unfinished, lines):
    """Scan step over a batch of lines.

    Args:
      unfinished: sentences of the document left open by earlier batches.
      lines: this batch of raw lines.

    Returns:
      (the document still open after this batch, (sentences of the documents
      completed in this batch, flat, and their sentence counts)).
    """
    lines = tf.strings.strip(lines)
    blank = tf.equal(lines, "")
    # Line i belongs to the document after the cumsum(blank)[i]-th blank line
    # of the batch; the unfinished document continues as document 0.
    document_ids = tf.concat(
        [
            tf.zeros(tf.shape(unfinished), tf.int64),
            tf.cumsum(tf.cast(blank, tf.int64)),
        ],
        axis=0,
    )
    sentences = tf.concat([unfinished, lines], axis=0)
    keep = tf.concat([tf.ones(tf.shape(unfinished), tf.bool), tf.logical_not(blank)], axis=0)
    documents = tf.RaggedTensor.from_value_rowids(
        tf.boolean_mask(sentences, keep),
        tf.boolean_mask(document_ids, keep),
        nrows=tf.reduce_sum(tf.cast(blank, tf.int64)) + 1,
    )
    # Every document but the last is closed by a blank line in this batch.
    completed = documents[:-1]
    # Runs of blank lines make empty documents; they are dropped here.
    completed = tf.ragged.boolean_mask(completed, completed.row_lengths() > 0)
    return documents[-1], (completed.flat_values, completed.row_lengths())


def _documents_of_batch(sentences, sentence_counts):
    return tf.data.Dataset.from_tensor_slices(
        tf.RaggedTensor.from_row_lengths(sentences, sentence_counts)
    )


def _as_dense(document):
    # Slices of a ragged tensor come out typed as ragged (ragged_rank 0); an
    # identity map makes the element spec a plain `TensorSpec([None])`.
    return document

