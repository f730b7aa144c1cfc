"""The on-disk cache of the normalizer's code point tables: read back equal,
rebuilt when damaged, optional when the folder cannot be written."""

import logging
import os
import unicodedata

import numpy as np
import pytest

from bert_tf.text import codepoint_tables as ct


def assert_same_tables(got, expected):
    assert (got.lower_case, got.unicode_version) == (expected.lower_case,
                                                     expected.unicode_version)
    for table in ("main", "ordering"):
        np.testing.assert_array_equal(getattr(got, table).block_index,
                                      getattr(expected, table).block_index)
        np.testing.assert_array_equal(getattr(got, table).blocks, getattr(expected, table).blocks)
    for name in ("expansion_splits", "expansion_cps", "expansion_kinds", "expansion_offsets",
                 "expansion_ccc"):
        np.testing.assert_array_equal(getattr(got, name), getattr(expected, name))


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """An empty cache folder for this test, and no tables remembered in the process."""
    monkeypatch.setenv("BERT_TF_CACHE_DIR", str(tmp_path / "cache"))
    ct.build_codepoint_tables.cache_clear()
    yield tmp_path / "cache"
    ct.build_codepoint_tables.cache_clear()


@pytest.fixture(scope="module")
def fresh_uncased():
    return ct.compute_codepoint_tables(True)


def test_tables_are_written_once_then_read_back_equal(cache_dir, fresh_uncased, monkeypatch):
    assert_same_tables(ct.build_codepoint_tables(True), fresh_uncased)
    path = ct.cache_file(True)
    assert os.path.dirname(path) == str(cache_dir) and os.path.isfile(path)
    assert os.listdir(cache_dir) == [os.path.basename(path)]  # no partial file left
    # A later process reads the file: building again would fail here.
    ct.build_codepoint_tables.cache_clear()

    def no_build(lower_case):
        raise AssertionError("the tables were rebuilt instead of read from the cache")

    monkeypatch.setattr(ct, "compute_codepoint_tables", no_build)
    assert_same_tables(ct.build_codepoint_tables(True), fresh_uncased)


def test_the_file_name_holds_the_mode_and_the_unicode_version(cache_dir):
    uncased, cased = ct.cache_file(True), ct.cache_file(False)
    assert uncased != cased and "_uncased_" in uncased and "_cased_" in cased
    assert f"unicode{unicodedata.unidata_version}_" in uncased


@pytest.mark.parametrize("damage", [b"not a zip file", b"PK\x03\x04 torn"])
def test_a_damaged_cache_file_is_rebuilt(cache_dir, fresh_uncased, damage, caplog):
    path = ct.cache_file(True)
    os.makedirs(cache_dir)
    with open(path, "wb") as f:
        f.write(damage)
    with caplog.at_level(logging.WARNING, logger=ct.__name__):
        assert_same_tables(ct.build_codepoint_tables(True), fresh_uncased)
    assert path in caplog.text and "unreadable" in caplog.text
    # Rewritten whole: the next process reads it.
    ct.build_codepoint_tables.cache_clear()
    assert_same_tables(ct._read_cache(path, True), fresh_uncased)


def test_an_unwritable_cache_folder_only_costs_the_build(tmp_path, monkeypatch, fresh_uncased):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    # A folder below a regular file cannot be created.
    monkeypatch.setenv("BERT_TF_CACHE_DIR", str(blocker / "cache"))
    ct.build_codepoint_tables.cache_clear()
    try:
        assert_same_tables(ct.build_codepoint_tables(True), fresh_uncased)
    finally:
        ct.build_codepoint_tables.cache_clear()
    assert os.listdir(tmp_path) == ["a_file"]
