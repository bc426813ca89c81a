"""Building a kernel: its CMake project, configure and compile, the staged build/<variant>/, the
CUTLASS, ROCm and ABI tooling it uses, the op-registration rule it enforces, and `kbuild init`."""
