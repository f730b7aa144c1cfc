import subprocess
import sys


def test_summary_command_builds_the_model():
    result = subprocess.run([sys.executable, "-m", "bert_tf.summary", "--preset", "bert_tiny"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "encoder parameters: 4,385,920" in result.stdout
    assert "BertPretrainer parameters:" in result.stdout
