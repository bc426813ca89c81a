"""`kernels.kernelize` swaps `layers.FP8Linear` into a model's fine-grained FP8 linear layers.

The host layer below has the attributes of the FP8 checkpoints' linear layers (`weight` FP8
(out, in), `weight_scale_inv` one float32 per 128x128 block, `bias`, `block_size`) and a
reference forward that dequantizes the weight and multiplies in float64, without quantizing
the input. It is mapped with `LocalLayerRepository` to the kernel folder that `kbuild test`
points LOCAL_KERNELS at (the fresh build). Select these tests with `-k kernelize`; the CUDA
ones (torch.compile with inductor, CUDA graphs) are skipped without a GPU.

Error bound of the kernel's forward against the reference, per output element
(`x` one token of the input, `w` one dequantized weight row, `s_g` the scale of x's 128-column
group g, amax_g / 448):

- The input is quantized to e4m3 (3 mantissa bits): a normal value is rounded to within half
  an ulp, 2^-4 of its magnitude; below e4m3's smallest normal (2^-6 in units of s_g) the
  spacing is 2^-9, so the error is at most 2^-10 s_g. Per product |dx_k w_k| <= 2^-4 |x_k w_k|
  + 2^-10 s_g |w_k|, summed: Q = 2^-4 sum |x_k||w_k| + 2^-10 sum s_g(k) |w_k|.
- The GEMM accumulates in float32 (K 2^-24 relative, K < 1000: under 1% of Q) and rounds its
  result to bfloat16: 2^-8 (|x.w| + Q).
- The result in the input's dtype, with the bias added, is rounded once more: u |y| (u = 2^-8
  for bfloat16, 2^-11 for float16); the reference's own rounding to that dtype: u |y_ref|;
  float16 results below its normal range: 2^-24 absolute.

bound = 1.01 (Q + 2^-8 (|x.w| + Q) + u (|y| + |y_ref|)) + 2^-24, the 1% covering the float32
terms. Inputs and weights are positive so that the sums of magnitudes equal the magnitudes
of the sums: the bound is then within ~2^-4 of the output, tight enough to catch a misplaced
scale block or a dropped bias (the biases are drawn on the scale of the outputs).
"""

import os
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from kernel_id import REPO_ID
from kernels import LocalLayerRepository, Mode, kernelize, use_kernel_forward_from_hub, use_kernel_mapping
from torch import nn
from torch.profiler import ProfilerActivity, profile

BLOCK = 128
E4M3_MAX = 448.0
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@use_kernel_forward_from_hub("FP8Linear")
class HostFP8Linear(nn.Module):
    """A fine-grained FP8 linear layer as checkpoints define it, with a dequantizing forward."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool,
        fp8: torch.dtype,
        dtype: torch.dtype,
        device: torch.device,
        seed: int,
    ) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        blocks = (-(-out_features // BLOCK), -(-in_features // BLOCK))
        weight = torch.rand(out_features, in_features, generator=generator) * 8
        # Scales ~ 1 / in_features keep every output well inside float16's range.
        scale = (0.25 + 4 * torch.rand(blocks, generator=generator)) / in_features
        self.weight = nn.Parameter(weight.to(device, fp8), requires_grad=False)
        self.weight_scale_inv = nn.Parameter(scale.to(device), requires_grad=False)
        bias_values = (16 * torch.rand(out_features, generator=generator)).to(device, dtype)  # ~ the outputs
        self.bias = nn.Parameter(bias_values, requires_grad=False) if bias else None
        self.block_size = (BLOCK, BLOCK)

    def dequantized_weight(self) -> torch.Tensor:
        rows, cols = self.weight.shape
        scale = self.weight_scale_inv.repeat_interleave(BLOCK, 0).repeat_interleave(BLOCK, 1)
        return self.weight.double() * scale.double()[:rows, :cols]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bias = None if self.bias is None else self.bias.double()
        return F.linear(x.double(), self.dequantized_weight(), bias).to(x.dtype)


class Block(nn.Module):
    """Up projection, activation, down projection: the shape of a transformer MLP."""

    def __init__(self, hidden: int, inner: int, fp8: torch.dtype, dtype: torch.dtype, device: torch.device) -> None:
        super().__init__()
        self.up = HostFP8Linear(hidden, inner, bias=False, fp8=fp8, dtype=dtype, device=device, seed=1)
        self.act = nn.SiLU()
        self.down = HostFP8Linear(inner, hidden, bias=True, fp8=fp8, dtype=dtype, device=device, seed=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(self.act(self.up(x)))


def kernel_dir() -> Path:
    """The kernel folder LOCAL_KERNELS maps REPO_ID to (what `kbuild test` loads), else this test's kernel."""
    for entry in os.environ.get("LOCAL_KERNELS", "").split(":"):
        repo_id, _, path = entry.partition("=")
        if repo_id == REPO_ID:
            return Path(path)
    return Path(__file__).resolve().parents[1]


def kernelized(
    model: nn.Module, device: torch.device, mode: Mode = Mode.INFERENCE, layers: tuple[str, ...] = ("FP8Linear",)
) -> nn.Module:
    mapping = {name: {device.type: LocalLayerRepository(repo_path=kernel_dir(), layer_name=name)} for name in layers}
    with use_kernel_mapping(mapping, inherit_mapping=False):
        return kernelize(model, mode=mode, device=device.type, use_fallback=False)


def replayed_on(model: nn.Module, x: torch.Tensor, x_next: torch.Tensor) -> torch.Tensor:
    """model's forward captured in a CUDA graph on x (after warm-up on a side stream), replayed
    on x_next copied into the captured input: the replay's output."""
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
    return static_y


def error_bound(layer: HostFP8Linear, x: torch.Tensor, got: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """The module docstring's bound on |got - ref| for layer's output got on input x."""
    tokens = x.double().reshape(-1, x.shape[-1])
    padded = F.pad(tokens, (0, -tokens.shape[1] % BLOCK))
    group_scale = padded.abs().view(tokens.shape[0], -1, BLOCK).amax(-1) / E4M3_MAX
    per_column_scale = group_scale.repeat_interleave(BLOCK, 1)[:, : tokens.shape[1]]
    w = layer.dequantized_weight()
    quantization = 2**-4 * (tokens.abs() @ w.abs().t()) + 2**-10 * (per_column_scale @ w.abs().t())
    product = (tokens @ w.t()).abs()
    unit = 2**-8 if x.dtype == torch.bfloat16 else 2**-11
    outputs = (got.double().abs() + ref.double().abs()).reshape(product.shape)
    rounding = 2**-8 * (product + quantization) + unit * outputs
    return (1.01 * (quantization + rounding) + 2**-24).reshape(got.shape)


def assert_within_bound(layer: HostFP8Linear, x: torch.Tensor, got: torch.Tensor) -> None:
    ref = type(layer).forward(layer, x)
    assert got.shape == ref.shape and got.dtype == x.dtype
    excess = (got.double() - ref.double()).abs() - error_bound(layer, x, got, ref)
    assert excess.max().item() <= 0, f"error exceeds the bound by {excess.max().item():.3g} at {excess.argmax()}"


def ops_called(fn, *args: torch.Tensor) -> set[str]:
    """Names of the operators dispatched while running fn(*args)."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn(*args)
    return {event.name for event in prof.events()}


def assert_kernel_ran(kernel, layers: list[nn.Module], fn, x: torch.Tensor) -> None:
    """Each layer's forward is the kernel's FP8Linear.forward, and fn dispatches the kernel's fp8_linear."""
    for layer in layers:
        assert layer.forward.__func__ is kernel.layers.FP8Linear.forward
    assert f"{kernel._ops.ops.name}::fp8_linear" in ops_called(fn, x)


def layer_inputs_and_outputs(model: nn.Module, x: torch.Tensor) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Runs model(x) and returns each HostFP8Linear's (input, output) by name."""
    seen: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    hooks = [
        module.register_forward_hook(lambda _, args, out, name=name: seen.__setitem__(name, (args[0], out)))
        for name, module in model.named_modules()
        if isinstance(module, HostFP8Linear)
    ]
    model(x)
    for hook in hooks:
        hook.remove()
    return seen


@pytest.mark.kernels_ci
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("leading", [(5,), (2, 3)], ids=str)
def test_kernelize_block_within_bound(kernel, device, fp8_dtype, dtype, leading):
    """Hidden 200 and inner 300: neither on the 128 grid, so partial scale blocks are used."""
    model = Block(200, 300, fp8_dtype, dtype, device)
    x = torch.rand(*leading, 200, generator=torch.Generator().manual_seed(3)).to(device, dtype)
    with torch.no_grad():
        kernelized(model, device)
        for name, (layer_in, layer_out) in layer_inputs_and_outputs(model, x).items():
            assert_within_bound(model.get_submodule(name), layer_in, layer_out)
        assert model(x).shape == (*leading, 200)
        assert_kernel_ran(kernel, [model.up, model.down], model, x)


@pytest.mark.kernels_ci
def test_kernelize_refuses_other_block_sizes(device, fp8_dtype):
    layer = HostFP8Linear(256, 128, bias=False, fp8=fp8_dtype, dtype=torch.bfloat16, device=device, seed=4)
    layer.block_size = (128, 64)
    kernelized(layer, device)
    with pytest.raises(ValueError, match=r"block_size must be \(128, 128\).*got \(128, 64\)"):
        layer(torch.rand(2, 256, device=device, dtype=torch.bfloat16))


@pytest.mark.kernels_ci
def test_kernelize_for_torch_compile_traces_into_one_graph(kernel, device, fp8_dtype):
    """Mode.TORCH_COMPILE keeps the kernel (FP8Linear declares can_torch_compile) and the
    quantizer and the op trace into one graph. On CPU the `aot_eager` backend (no C++ codegen)."""
    layer = HostFP8Linear(384, 256, bias=True, fp8=fp8_dtype, dtype=torch.bfloat16, device=device, seed=5)
    x = torch.rand(4, 7, 384, generator=torch.Generator().manual_seed(6)).to(device, torch.bfloat16)
    with torch.no_grad():
        kernelized(layer, device, Mode.INFERENCE | Mode.TORCH_COMPILE)
        compiled = torch.compile(layer, fullgraph=True, backend="inductor" if device.type == "cuda" else "aot_eager")
        assert_within_bound(layer, x, compiled(x))
        assert_kernel_ran(kernel, [layer], compiled, x)


@pytest.mark.kernels_ci
@needs_cuda
def test_kernelize_cuda_graph_capture_and_replay(kernel, device, fp8_dtype):
    model = Block(7168, 2048, fp8_dtype, torch.bfloat16, device)
    generator = torch.Generator().manual_seed(7)
    x, x_next = (torch.rand(2, 16, 7168, generator=generator).to(device, torch.bfloat16) for _ in range(2))
    with torch.no_grad():
        kernelized(model, device)
        expected = model(x_next)
        static_y = replayed_on(model, x, x_next)
        # bfloat16 tolerance: a split-K reduction may sum in another order from call to call.
        torch.testing.assert_close(static_y, expected)
        assert_kernel_ran(kernel, [model.up, model.down], model, x)


GATED = ("FP8GatedMLP", "FP8Linear")  # the layers a gated block's kernelization maps


@use_kernel_forward_from_hub("FP8GatedMLP")
class GatedBlock(nn.Module):
    """A gated MLP block of FP8 linear layers: down_proj(silu(gate) * up), gate | up = gate_up_proj(x)."""

    def __init__(self, hidden: int, inner: int, fp8: torch.dtype, device: torch.device) -> None:
        super().__init__()
        self.gate_up_proj = HostFP8Linear(
            hidden, 2 * inner, bias=True, fp8=fp8, dtype=torch.bfloat16, device=device, seed=8
        )
        self.down_proj = HostFP8Linear(inner, hidden, bias=True, fp8=fp8, dtype=torch.bfloat16, device=device, seed=9)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up_proj(x.double()).chunk(2, dim=-1)
        return self.down_proj(F.silu(gate) * up)


@pytest.mark.kernels_ci
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_kernelize_gated_mlp_runs_the_fused_down_projection(kernel, device, fp8_dtype, compiled):
    """The whole block in two ops, the second quantizing silu(gate) * up itself: equal to those two
    ops called by hand, and within FP8's error of the float64 block (hidden 200, inner 300: partial
    scale blocks)."""
    block = GatedBlock(200, 300, fp8_dtype, device)
    x = torch.rand(3, 5, 200, generator=torch.Generator().manual_seed(10)).to(device, torch.bfloat16)
    mode = Mode.INFERENCE | Mode.TORCH_COMPILE if compiled else Mode.INFERENCE
    with torch.no_grad():
        reference = GatedBlock.forward(block, x)
        kernelized(block, device, mode, GATED)
        assert block.forward.__func__ is kernel.layers.FP8GatedMLP.forward
        run = block
        if compiled:
            run = torch.compile(block, fullgraph=True, backend="inductor" if device.type == "cuda" else "aot_eager")
        got = run(x)
        gate_up, down = block.gate_up_proj, block.down_proj
        hidden = kernel.fp8_linear(x, gate_up.weight, gate_up.weight_scale_inv, gate_up.bias)
        by_hand = kernel.silu_and_mul_fp8_linear(hidden, down.weight, down.weight_scale_inv, down.bias)
        assert got.shape == (3, 5, 200) and got.dtype == torch.bfloat16
        assert torch.equal(got, by_hand)
        error = ((got.double() - reference).norm() / reference.norm()).item()
        assert error < 2**-5, error
        called = ops_called(run, x)
        assert f"{kernel._ops.ops.name}::silu_and_mul_fp8_linear" in called
        assert f"{kernel._ops.ops.name}::silu_and_mul" not in called


@pytest.mark.kernels_ci
def test_kernelize_gated_mlp_names_the_projection_at_fault(device, fp8_dtype):
    block = GatedBlock(256, 128, fp8_dtype, device)
    block.down_proj.block_size = (128, 64)
    kernelized(block, device, layers=GATED)
    with pytest.raises(ValueError, match=r"FP8GatedMLP.down_proj: block_size must be \(128, 128\)"):
        block(torch.rand(2, 256, device=device, dtype=torch.bfloat16))


@pytest.mark.kernels_ci
def test_kernelize_gated_mlp_refuses_another_activation(device, fp8_dtype):
    block = GatedBlock(256, 128, fp8_dtype, device)
    block.act_fn = nn.GELU()
    kernelized(block, device, layers=GATED)
    with pytest.raises(ValueError, match="FP8GatedMLP: computes SiLU, but the block's act_fn is GELU"):
        block(torch.rand(2, 256, device=device, dtype=torch.bfloat16))


@pytest.mark.kernels_ci
@needs_cuda
def test_kernelize_gated_mlp_cuda_graph_capture_and_replay(kernel, device, fp8_dtype):
    block = GatedBlock(7168, 2048, fp8_dtype, device)
    generator = torch.Generator().manual_seed(11)
    x, x_next = (torch.rand(16, 7168, generator=generator).to(device, torch.bfloat16) for _ in range(2))
    with torch.no_grad():
        kernelized(block, device, layers=GATED)
        expected = block(x_next)
        static_y = replayed_on(block, x, x_next)
        assert torch.equal(static_y, expected)
