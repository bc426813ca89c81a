"""`kernels.kernelize` swaps `layers.ReLU` into a model's decorated activation layers.

The model is built here; its activation layer is mapped with `LocalLayerRepository` to the
kernel folder that `kbuild test` points LOCAL_KERNELS at (the fresh build). Select these
tests with `-k kernelize`; the CUDA ones are skipped without a GPU.
"""

import os
from pathlib import Path

import pytest
import torch
from kernels import LocalLayerRepository, Mode, get_kernel, kernelize, use_kernel_forward_from_hub, use_kernel_mapping
from torch import nn
from torch.profiler import ProfilerActivity, profile

REPO_ID = "kernels-community/relu"
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@use_kernel_forward_from_hub("ReLU")
class HostReLU(nn.Module):
    """The model's own activation layer; its forward is the reference."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def kernel_dir() -> Path:
    """The kernel folder LOCAL_KERNELS maps REPO_ID to (what `kbuild test` loads), else this test's kernel."""
    for entry in os.environ.get("LOCAL_KERNELS", "").split(":"):
        repo_id, _, path = entry.partition("=")
        if repo_id == REPO_ID:
            return Path(path)
    return Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def kernel():
    return get_kernel(REPO_ID, version=1)


def make_model(dtype: torch.dtype) -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 96), HostReLU(), nn.Linear(96, 32), HostReLU())
    return model.to(device=DEVICE, dtype=dtype).eval()


def kernelized(model: nn.Module, mode: Mode) -> nn.Module:
    mapping = {"ReLU": {DEVICE: LocalLayerRepository(repo_path=kernel_dir(), layer_name="ReLU")}}
    with use_kernel_mapping(mapping, inherit_mapping=False):
        return kernelize(model, mode=mode, device=DEVICE, use_fallback=False)


def ops_called(fn, *args: torch.Tensor) -> set[str]:
    """Names of the operators dispatched while running fn(*args)."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn(*args)
    return {event.name for event in prof.events()}


def assert_kernel_ran(kernel, model: nn.Module, fn, x: torch.Tensor) -> None:
    """Each activation's forward is the kernel's, and running fn dispatches the kernel's op."""
    for layer in (model[1], model[3]):
        assert layer.forward.__func__ is kernel.layers.ReLU.forward
    assert f"{kernel._ops.ops.name}::relu" in ops_called(fn, x)


@pytest.mark.kernels_ci
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_kernelize_matches_reference(kernel, dtype):
    model = make_model(dtype)
    x = torch.randn(3, 5, 64, generator=torch.Generator().manual_seed(1)).to(DEVICE, dtype)
    with torch.no_grad():
        expected = model(x)
        kernelized(model, Mode.INFERENCE)
        torch.testing.assert_close(model(x), expected, rtol=0, atol=0)
        assert_kernel_ran(kernel, model, model, x)


@pytest.mark.kernels_ci
def test_kernelize_for_torch_compile_traces_into_one_graph(kernel):
    """Mode.TORCH_COMPILE keeps the kernel (the layer declares can_torch_compile); fullgraph
    tracing through its op works. On CPU the `aot_eager` backend (no C++ codegen)."""
    model = make_model(torch.float32)
    x = torch.randn(4, 64, generator=torch.Generator().manual_seed(2)).to(DEVICE)
    with torch.no_grad():
        expected = model(x)
        kernelized(model, Mode.INFERENCE | Mode.TORCH_COMPILE)
        compiled = torch.compile(model, fullgraph=True, backend="inductor" if DEVICE == "cuda" else "aot_eager")
        torch.testing.assert_close(compiled(x), expected)  # inductor may fuse the Linear bias differently
        assert_kernel_ran(kernel, model, compiled, x)


@pytest.mark.kernels_ci
@needs_cuda
def test_kernelize_cuda_graph_capture_and_replay(kernel):
    model = make_model(torch.bfloat16)
    generator = torch.Generator().manual_seed(3)
    x, x_next = (torch.randn(8, 64, generator=generator).to(DEVICE, torch.bfloat16) for _ in range(2))
    with torch.no_grad():
        expected = model(x_next)
        kernelized(model, Mode.INFERENCE)
        static_x = x.clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                model(static_x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_y = model(static_x)
        static_x.copy_(x_next)
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(static_y, expected, rtol=0, atol=0)
        assert_kernel_ran(kernel, model, model, x)
