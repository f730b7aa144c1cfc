"""SQuAD v1.1 / v2.0: its files read into examples, and BERT's windowed span features.

The two jobs live apart: `bert_tf.data.squad_reader` reads the files
(`read_squad`, `split_by_article`), `bert_tf.data.squad_windows` cuts the
examples into the model's windows (`create_features`). Both are importable
from here as well, where the documentation names them.
"""

from bert_tf.data.squad_reader import (
    SquadExample,
    SquadFormatError,
    read_squad,
    split_by_article,
)
from bert_tf.data.squad_windows import SquadFeatures, create_features

__all__ = ["SquadExample", "SquadFeatures", "SquadFormatError", "create_features", "read_squad",
           "split_by_article"]
