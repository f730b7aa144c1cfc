"""The bert_tf release version, in a module of its own.

Low-level modules (checkpoint and export metadata) record it; importing it
from here rather than from the package root keeps them free of the root's
lazy entry points, and setuptools reads it (`setup.cfg`) without importing
TensorFlow.
"""

__version__ = "0.1.0"
