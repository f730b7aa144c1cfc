"""Every file access in `bert_tf/` goes through `bert_tf.storage`, so `gs://` paths work.

A bare `open(...)`, `os.replace`, `shutil.copyfile`... takes `gs://bucket/run`
for a local folder named `gs:`: the run is split between the bucket and the
working directory. This test parses the package and fails on such a call
outside `bert_tf/storage.py`, except at the few sites listed below, which
never see a user's path.
"""

import ast
import os

PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bert_tf")
STORAGE_MODULE = "storage.py"

# Calls that take a path and bypass tf.io.gfile.
BANNED = {"open", "os.replace", "os.rename", "os.remove", "os.unlink", "os.makedirs",
          "os.mkdir", "os.listdir", "os.scandir", "os.walk", "os.path.exists", "os.path.isdir",
          "os.path.isfile", "os.path.getsize", "glob.glob", "glob.iglob", "tempfile.mkstemp",
          "tempfile.mkdtemp"}
BANNED_MODULES = ("shutil.",)

# (file under bert_tf/, call) -> why that site is no user path.
LOCAL_CACHE = "the table cache is a local folder (BERT_TF_CACHE_DIR or ~/.cache)"
ALLOWED = {
    ("text/codepoint_tables.py", "open"):
        "reads its own source file (`__file__`) to fingerprint the generated table",
    ("text/codepoint_tables.py", "os.makedirs"): LOCAL_CACHE,
    ("text/codepoint_tables.py", "tempfile.mkstemp"): LOCAL_CACHE,
    ("text/codepoint_tables.py", "os.replace"): LOCAL_CACHE,
    ("text/codepoint_tables.py", "os.path.exists"): LOCAL_CACHE,
    ("text/codepoint_tables.py", "os.remove"): LOCAL_CACHE,
    ("training/precision.py", "open"): "reads /proc/cpuinfo",
    ("training/progress.py", "shutil.get_terminal_size"): "the terminal's width, no file",
    ("data/glue.py", "tempfile.mkstemp"):
        "local branch only: object storage takes `storage.atomic_write` before it",
}


def _dotted(node):
    """`a.b.c` for a Name/Attribute chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _path_calls(path):
    """(line, dotted name) of each banned call in the file at `path`."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name and (name in BANNED or name.startswith(BANNED_MODULES)):
                found.append((node.lineno, name))
    return sorted(found)


def _package_files():
    for root, _, files in os.walk(PACKAGE):
        for name in sorted(files):
            if name.endswith(".py"):
                yield os.path.relpath(os.path.join(root, name), PACKAGE)


def test_file_access_goes_through_the_storage_module():
    offenders, used = [], set()
    for relative in _package_files():
        if relative == STORAGE_MODULE:
            continue
        for line, name in _path_calls(os.path.join(PACKAGE, relative)):
            if (relative, name) in ALLOWED:
                used.add((relative, name))
            else:
                offenders.append(f"bert_tf/{relative}:{line}: {name}(...)")
    assert not offenders, ("call bert_tf.storage instead (or allow-list a site that never "
                           "sees a user's path, with the reason):\n" + "\n".join(offenders))
    # An allowance whose site is gone must go too, so the list stays the truth.
    assert not set(ALLOWED) - used, sorted(set(ALLOWED) - used)


def test_the_guard_finds_each_kind_of_call(tmp_path):
    source = tmp_path / "module.py"
    source.write_text("import os, shutil, glob\n"
                      "open('a')\nos.replace('a', 'b')\nshutil.copyfile('a', 'b')\n"
                      "os.path.exists('a')\nos.makedirs('a')\nglob.glob('*')\n"
                      "storage.open('a')\nos.path.join('a', 'b')\n")
    assert [name for _, name in _path_calls(str(source))] == [
        "open", "os.replace", "shutil.copyfile", "os.path.exists", "os.makedirs", "glob.glob"]
