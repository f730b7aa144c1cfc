"""The `Examples:` of the public classes and loading functions run, as doctests.

Each docstring's examples run in a fresh namespace holding only `vocab_file`
(the shared bert-base-uncased vocabulary), so an example that drifts from
the code fails here.
"""

import doctest
import importlib

import pytest

# The public API a user meets first: the loaders `bert_tf` exports, the encoder,
# the task models, the raw-text preprocessor and model, and the tokenizer.
PUBLIC = [
    "bert_tf.checkpoints.loading.load_encoder",
    "bert_tf.checkpoints.loading.load_pretrainer",
    "bert_tf.checkpoints.loading.load_preprocessor",
    "bert_tf.models.bert_encoder.BertEncoder",
    "bert_tf.models.bert_pretrainer.BertPretrainer",
    "bert_tf.models.bert_classifier.BertClassifier",
    "bert_tf.models.bert_span_labeler.BertSpanLabeler",
    "bert_tf.models.bert_token_classifier.BertTokenClassifier",
    "bert_tf.models.bert_multiple_choice.BertMultipleChoice",
    "bert_tf.models.bert_feature_tagger.BertFeatureTagger",
    "bert_tf.models.text_model.TextModel",
    "bert_tf.layers.text_preprocessor.TextPreprocessor",
    "bert_tf.text.tokenizer.BertTokenizer",
]


def _public_object(dotted):
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def test_every_public_loader_is_listed():
    import bert_tf

    loaders = {name for name in bert_tf.__all__ if name.startswith("load_")}
    assert {f"bert_tf.checkpoints.loading.{name}" for name in loaders} <= set(PUBLIC)


@pytest.mark.parametrize("dotted", PUBLIC)
def test_the_docstring_examples_run(dotted, shared_file):
    target = _public_object(dotted)
    assert "\n    Examples:\n" in target.__doc__, f"{dotted} has no Examples: section"
    globs = {"vocab_file": shared_file("vocab", "bert-base-uncased-vocab.txt")}
    # Only the object's own docstring, not its methods'.
    (test,) = doctest.DocTestFinder(recurse=False).find(target, dotted, module=False,
                                                        globs=globs)
    assert test.examples
    report = []
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    failed, attempted = runner.run(test, out=report.append)
    assert attempted == len(test.examples) and failed == 0, "".join(report)
