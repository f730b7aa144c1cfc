"""Every file access in `bert_tf/` goes through `bert_tf.storage`, so `gs://` paths work.

A bare `open(...)`, `os.replace`, `shutil.copyfile`... takes `gs://bucket/run`
for a local folder named `gs:`: the run is split between the bucket and the
working directory. This test parses the package and fails on such a call
outside `bert_tf/storage.py`, except at the few sites listed below, which
never see a user's path.

The checker reads each module's imports, so a call is caught under any name
it was imported as: `from os import replace`, `import shutil as sh`,
`from os.path import exists`, `io.open`, `codecs.open`. A `pathlib` path is
caught at its I/O methods (`Path(p).open()`, `.read_text()`, `.write_text()`,
`.exists()`, ...), on the `Path(...)` expression itself, on a name assigned
one, or on an argument annotated `Path`.
"""

import ast
import os

import pytest

PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bert_tf")
STORAGE_MODULE = "storage.py"

# Calls that take a path and bypass tf.io.gfile, by their canonical (imported) name.
BANNED = {"open", "builtins.open", "io.open", "codecs.open", "os.open", "os.replace",
          "os.rename", "os.renames", "os.remove", "os.unlink", "os.rmdir", "os.removedirs",
          "os.makedirs", "os.mkdir", "os.listdir", "os.scandir", "os.walk", "os.stat",
          "os.path.exists", "os.path.lexists", "os.path.isdir", "os.path.isfile",
          "os.path.getsize", "os.path.getmtime", "glob.glob", "glob.iglob",
          "tempfile.mkstemp", "tempfile.mkdtemp"}
BANNED_MODULES = ("shutil.",)

# pathlib: what makes a path object, what derives one from another, and its I/O methods.
PATH_CLASSES = {"pathlib.Path", "pathlib.PurePath", "pathlib.PosixPath", "pathlib.WindowsPath"}
PATH_DERIVING = {"parent", "with_name", "with_suffix", "with_stem", "joinpath", "resolve",
                 "absolute", "expanduser", "relative_to", "cwd", "home"}
PATH_IO = {"open", "read_text", "write_text", "read_bytes", "write_bytes", "exists",
           "is_file", "is_dir", "is_symlink", "mkdir", "rmdir", "touch", "unlink", "rename",
           "replace", "iterdir", "glob", "rglob", "stat", "lstat", "chmod", "samefile",
           "symlink_to", "hardlink_to", "readlink"}

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


def _imports(tree):
    """{local name: the dotted name it stands for} from the module's import statements."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
                else:  # `import os.path` binds `os`
                    head = alias.name.partition(".")[0]
                    names[head] = head
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            for alias in node.names:
                names[alias.asname or alias.name] = f"{module}.{alias.name}"
    return names


def _canonical(dotted, imports):
    """`dotted` with its first part replaced by what the module imported under that name."""
    head, dot, rest = dotted.partition(".")
    return imports.get(head, head) + dot + rest


class _PathNames:
    """Which expressions of a module are `pathlib` paths."""

    def __init__(self, tree, imports):
        self.imports = imports
        self.names = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.arg) and node.annotation is not None:
                annotation = _dotted(node.annotation)
                if annotation and _canonical(annotation, imports) in PATH_CLASSES:
                    self.names.add(node.arg)
        # Names assigned a path, until no new one appears (`b = a / "x"` after `a = Path()`).
        assignments = [node for node in ast.walk(tree)
                       if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr))]
        while True:
            before = len(self.names)
            for node in assignments:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if node.value is not None and self.is_path(node.value):
                    self.names.update(t.id for t in targets if isinstance(t, ast.Name))
            if len(self.names) == before:
                break

    def is_path(self, node):
        if isinstance(node, ast.Name):
            return node.id in self.names
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            return self.is_path(node.left)
        if isinstance(node, ast.Attribute):
            return node.attr == "parent" and self.is_path(node.value)
        if isinstance(node, ast.Subscript):  # path.parents[1]
            return (isinstance(node.value, ast.Attribute) and node.value.attr == "parents"
                    and self.is_path(node.value.value))
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name and _canonical(name, self.imports) in PATH_CLASSES:
                return True
            if isinstance(node.func, ast.Attribute) and node.func.attr in PATH_DERIVING:
                receiver = node.func.value
                receiver_name = _dotted(receiver)
                return self.is_path(receiver) or bool(
                    receiver_name and _canonical(receiver_name, self.imports) in PATH_CLASSES)
        return False


def _banned_calls(source, filename="<source>"):
    """(line, canonical name) of each call in `source` that bypasses `bert_tf.storage`."""
    tree = ast.parse(source, filename)
    imports = _imports(tree)
    paths = _PathNames(tree, imports)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if (isinstance(func, ast.Attribute) and func.attr in PATH_IO
                and paths.is_path(func.value)):
            found.append((node.lineno, f"pathlib.Path.{func.attr}"))
            continue
        name = _dotted(func)
        if name is None:
            continue
        name = _canonical(name, imports)
        if name in BANNED or name.startswith(BANNED_MODULES):
            found.append((node.lineno, name))
    return sorted(found)


def _path_calls(path):
    """(line, canonical name) of each banned call in the file at `path`."""
    with open(path, encoding="utf-8") as f:
        return _banned_calls(f.read(), path)


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


# Each form a module could reach the file system by, and the name the guard gives it.
CAUGHT = [
    ("from os import replace\nreplace('a', 'b')", "os.replace"),
    ("from os import replace as swap\nswap('a', 'b')", "os.replace"),
    ("import os as o\no.remove('a')", "os.remove"),
    ("from os import path\npath.exists('a')", "os.path.exists"),
    ("from os.path import exists\nexists('a')", "os.path.exists"),
    ("import os.path\nos.path.isfile('a')", "os.path.isfile"),
    ("from shutil import copyfile\ncopyfile('a', 'b')", "shutil.copyfile"),
    ("from shutil import rmtree as wipe\nwipe('a')", "shutil.rmtree"),
    ("import shutil as sh\nsh.move('a', 'b')", "shutil.move"),
    ("import io\nio.open('a')", "io.open"),
    ("from io import open as io_open\nio_open('a')", "io.open"),
    ("import codecs\nwith codecs.open('a') as f:\n    pass", "codecs.open"),
    ("import builtins\nbuiltins.open('a')", "builtins.open"),
    ("from glob import glob\nglob('*')", "glob.glob"),
    ("from tempfile import mkdtemp\nmkdtemp(dir='a')", "tempfile.mkdtemp"),
    ("import pathlib\npathlib.Path('a').open()", "pathlib.Path.open"),
    ("from pathlib import Path\nPath('a').write_text('x')", "pathlib.Path.write_text"),
    ("from pathlib import Path\np = Path('a')\np.read_text()", "pathlib.Path.read_text"),
    ("from pathlib import Path as P\nq = P('a') / 'b'\nr = q.parent\nr.mkdir()",
     "pathlib.Path.mkdir"),
    ("import pathlib\n(pathlib.Path('a') / 'b').read_bytes()", "pathlib.Path.read_bytes"),
    ("from pathlib import Path\nPath.home().joinpath('a').exists()", "pathlib.Path.exists"),
    ("from pathlib import Path\ndef f(p: Path):\n    return p.write_bytes(b'')",
     "pathlib.Path.write_bytes"),
]


@pytest.mark.parametrize("source, name", CAUGHT, ids=[name for _, name in CAUGHT])
def test_the_guard_catches_each_import_form(source, name):
    assert [found for _, found in _banned_calls(source)] == [name]


# Lookalikes that are not a bare file access.
NOT_CAUGHT = [
    "from bert_tf import storage\nstorage.open('a')\nstorage.read_text('a')",
    "from bert_tf.storage import open\nopen('a')",
    "from . import storage\nstorage.exists('a')",
    "import tensorflow as tf\ntf.io.gfile.exists('a')\ntf.io.gfile.GFile('a').read()",
    "import os\nos.path.join('a', 'b')\nos.path.basename('a')",
    "config.read_text()\nrecord.open()",
    "from pathlib import PurePosixPath\nPurePosixPath('a').name",
]


@pytest.mark.parametrize("source", NOT_CAUGHT)
def test_the_guard_leaves_lookalikes_alone(source):
    assert _banned_calls(source) == []
