"""Which GPU kernels a call runs, for the tests that check the Hopper dispatch."""

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile


def on_hopper(device) -> bool:
    return device.type == "cuda" and not torch.version.hip and torch.cuda.get_device_capability(device) == (9, 0)


def gpu_kernels_run(fn) -> list[str]:
    """The names of the GPU kernels fn launches."""
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return [e.name for e in prof.events() if e.device_type == DeviceType.CUDA]
