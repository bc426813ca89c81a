"""kbuild: build, check, test and publish PyTorch kernels for the Kernel Hub."""

__version__ = "0.1.0"
