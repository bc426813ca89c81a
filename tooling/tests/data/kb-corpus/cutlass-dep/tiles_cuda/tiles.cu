#include <cutlass/cutlass.h>
