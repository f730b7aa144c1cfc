"""TensorBoard tags: grouped so losses and accuracies come first, and read back by name."""


def test_summary_tags_group_metrics_and_read_back():
    from bert_tf.training.summaries import metric_name, summary_tag

    assert summary_tag("loss") == "losses/loss" and summary_tag("nsp_loss") == "losses/nsp_loss"
    assert summary_tag("mlm_accuracy") == "metrics/mlm_accuracy"
    assert summary_tag("f1") == "metrics/f1"
    assert summary_tag("learning_rate") == "optimizer/learning_rate"
    assert summary_tag("tokens_per_second") == "throughput/tokens_per_second"
    for name in ("loss", "mlm_accuracy", "learning_rate", "eng.testa/f1"):
        assert metric_name(summary_tag(name)) == name
    assert metric_name("mlm_accuracy") == "mlm_accuracy"  # runs written before the groups
