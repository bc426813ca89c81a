# The test kernels here are built and tested by test_compat.py, never collected directly.
collect_ignore_glob = ["*"]
