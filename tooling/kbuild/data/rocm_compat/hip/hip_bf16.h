#pragma once
// kbuild's stand-in for <hip/hip_bf16.h> (ROCm 6 and later), used only by kbuild.build.rocm's
// device-only compile check and only when the installed HIP headers lack that header (Debian 12
// ships HIP 5.2.3): kbuild.build.rocm searches this folder after the system headers (-idirafter).
// It maps the ROCm 6 bfloat16 type, which hipified `__nv_bfloat16` becomes, onto HIP 5.2's
// hip_bfloat16 (constructible from float, comparable, convertible to float). Real ROCm builds
// use the real header.
#include <hip/hip_bfloat16.h>

typedef hip_bfloat16 __hip_bfloat16;
