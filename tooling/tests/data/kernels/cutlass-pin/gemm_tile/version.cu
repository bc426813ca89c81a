#include <cutlass/version.h>

#include <cstdint>

static_assert(CUTLASS_MAJOR == 3 && CUTLASS_MINOR == 9, "cutlass_3_9 must give CUTLASS 3.9");

int64_t cutlass_version() { return CUTLASS_MAJOR * 100 + CUTLASS_MINOR; }
