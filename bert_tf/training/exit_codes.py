"""The exit codes of `python -m bert_tf.train` that tell a cluster manager to restart the job.

Both differ from 1 (the run failed) and 2 (a usage error), which a restart
does not cure. Importing this module imports no TensorFlow.
"""

# After a multi-worker or TPU preemption: every worker saved at one step and left
# (TensorFlow's convention).
PREEMPTION_EXIT_CODE = 42
# The survivors' code when a worker of a multi-worker run disappeared without warning
# (sysexits' EX_TEMPFAIL): restart every worker; the run resumes from its last checkpoint.
LOST_WORKER_EXIT_CODE = 75
