#include <torch/all.h>
#include <torch/library.h>

#include "registration.h"

int64_t cutlass_version();

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) { ops.def("cutlass_version() -> int", &cutlass_version); }

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
