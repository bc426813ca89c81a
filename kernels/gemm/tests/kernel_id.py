"""The Hub repository the tests load the kernel as (kbuild test maps it to the fresh build)."""

REPO_ID = "kernels-community/gemm"
VERSION = 1
