"""Which GPU kernels a call runs, for the tests that check the Hopper dispatch."""

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile


def on_hopper(device) -> bool:
    return device.type == "cuda" and not torch.version.hip and torch.cuda.get_device_capability(device) == (9, 0)


def hopper_dispatch(kernel, device) -> bool:
    """Whether calls on device go through the Hopper path's dispatch: a Hopper GPU, the general path not
    forced (GEMM_FORCE_GENERAL=1 or kernel.force_general_path(True))."""
    if not on_hopper(device):
        return False
    forced = kernel.force_general_path(False)
    kernel.force_general_path(forced)
    return not forced


def gpu_kernels_run(fn) -> list[str]:
    """The names of the GPU kernels fn launches."""
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return [e.name for e in prof.events() if e.device_type == DeviceType.CUDA]
