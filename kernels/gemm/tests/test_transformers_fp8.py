"""A transformers FP8 model on the kernel: `layers.FP8SplitGatedMLP` (gated MLPs with separate
`gate_proj` and `up_proj`) and the card's recipe, run on a tiny DeepseekV3 model.

The tiny model is examples/deepseek_v3_fp8.py's (`--tiny`): transformers' `DeepseekV3ForCausalLM`
with hidden 256, 8 routed experts and two layers (the first dense), its linear layers converted
by transformers' own `replace_with_fp8_linear` and holding the random weights quantized per
128x128 block, as transformers loads a `FineGrainedFP8Config` checkpoint. The recipe is the
python block of CARD.md's "A transformers FP8 model" section, rendered (repository id and
version) and run as it stands but for its `LayerRepository(...)`, which becomes the
`LocalLayerRepository` of the build under test (a Hub version is not resolved offline).
"""

import json
import re
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from kernel_id import REPO_ID, VERSION
from kernels import Mode, use_kernel_forward_from_hub
from test_kernelize import HostFP8Linear, kernel_dir, kernelized, ops_called
from torch import nn

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
CARD = Path(__file__).resolve().parents[1] / "CARD.md"
SPLIT = ("FP8SplitGatedMLP", "FP8Linear")


@use_kernel_forward_from_hub("FP8SplitGatedMLP")
class SplitBlock(nn.Module):
    """A gated MLP of FP8 linear layers with separate gate and up projections."""

    def __init__(self, hidden: int, inner: int, fp8: torch.dtype, device: torch.device) -> None:
        super().__init__()
        layer = {"bias": False, "fp8": fp8, "dtype": torch.bfloat16, "device": device}
        self.gate_proj = HostFP8Linear(hidden, inner, seed=12, **layer)
        self.up_proj = HostFP8Linear(hidden, inner, seed=13, **layer)
        self.down_proj = HostFP8Linear(inner, hidden, seed=14, **{**layer, "bias": True})
        self.act_fn = nn.SiLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.double()
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


@pytest.mark.kernels_ci
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_kernelize_split_gated_mlp_quantizes_once_for_both_projections(kernel, device, fp8_dtype, compiled):
    """Equal to its ops called by hand (one quantization, a GEMM per projection into the halves of
    one buffer, the fused down projection) and within FP8's error of the float64 block; hidden 200
    and inner 300 are off the 128 grid (partial scale blocks, a GEMM writing a strided half)."""
    block = SplitBlock(200, 300, fp8_dtype, device)
    x = torch.rand(3, 5, 200, generator=torch.Generator().manual_seed(15)).to(device, torch.bfloat16)
    mode = Mode.INFERENCE | Mode.TORCH_COMPILE if compiled else Mode.INFERENCE
    with torch.no_grad():
        reference = SplitBlock.forward(block, x)
        kernelized(block, device, mode, SPLIT)
        assert block.forward.__func__ is kernel.layers.FP8SplitGatedMLP.forward
        run = block
        if compiled:
            run = torch.compile(block, fullgraph=True, backend="inductor" if device.type == "cuda" else "aot_eager")
        got = run(x)
        gate, up, down = block.gate_proj, block.up_proj, block.down_proj
        q, scale = kernel.quantize_per_token_group(x.reshape(15, 200), dtype=fp8_dtype)
        halves = torch.cat(
            [kernel.gemm_nt(q, p.weight, scale, p.weight_scale_inv) for p in (gate, up)], dim=-1
        )  # fmt: skip
        by_hand = kernel.silu_and_mul_fp8_linear(halves, down.weight, down.weight_scale_inv, down.bias)
        assert got.shape == (3, 5, 200) and got.dtype == torch.bfloat16
        assert torch.equal(got, by_hand.reshape(3, 5, 200))
        error = ((got.double() - reference).norm() / reference.norm()).item()
        assert error < 2**-5, error
        called = ops_called(run, x)
        namespace = kernel._ops.ops.name
        assert {f"{namespace}::quantize", f"{namespace}::gemm_nt", f"{namespace}::silu_and_mul_fp8_linear"} <= called
        assert f"{namespace}::fp8_linear" not in called  # the projections' own layers did not run


@pytest.mark.kernels_ci
@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda b: setattr(b.up_proj, "bias", b.down_proj.bias[:128]), "gate_proj and up_proj must have no bias"),
        (lambda b: setattr(b.up_proj, "block_size", (128, 64)), r"FP8SplitGatedMLP.up_proj: block_size"),
        (lambda b: setattr(b, "act_fn", nn.GELU()), "FP8SplitGatedMLP: computes SiLU, but the block's act_fn is GELU"),
    ],
    ids=["bias", "block_size", "activation"],
)
def test_kernelize_split_gated_mlp_refuses_what_it_cannot_run(device, fp8_dtype, change, message):
    block = SplitBlock(256, 128, fp8_dtype, device)
    change(block)
    kernelized(block, device, layers=SPLIT)
    with pytest.raises(ValueError, match=message):
        block(torch.rand(2, 256, device=device, dtype=torch.bfloat16))


def deepseek_v3_example():
    """examples/deepseek_v3_fp8.py as a module (it needs transformers, a test dependency: kbuild[test])."""
    pytest.importorskip("transformers", reason="transformers is a test dependency of this kernel (kbuild[test])")
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    import deepseek_v3_fp8

    return deepseek_v3_fp8


def card_recipe() -> str:
    """The python block of the card's transformers section as rendered, mapped to the build under test."""
    section = CARD.read_text().split("### A transformers FP8 model", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, flags=re.DOTALL)[1]
    code = code.replace("{{ repo_id }}", REPO_ID).replace("{{version}}", str(VERSION))  # as kbuild card renders
    hub = f'LayerRepository("{REPO_ID}", layer_name=n, version={VERSION})'
    assert code.count(hub) == 1, "the card's recipe names the repository another way: update this test"
    assert len([line for line in code.splitlines() if line.strip()]) <= 10
    loaded = f'get_kernel("{REPO_ID}", version={VERSION})'
    assert code.count(loaded) == 1, "the card's recipe loads the kernel another way: update this test"
    local = f"LocalLayerRepository(repo_path=Path({str(kernel_dir())!r}), layer_name=n)"
    code = code.replace(hub, local).replace(loaded, "kernel_under_test")
    return "from pathlib import Path\nfrom kernels import LocalLayerRepository\n" + code


@pytest.mark.kernels_ci
def test_kernelize_card_recipe_runs_a_tiny_transformers_deepseek_v3_on_the_kernel(kernel, device):
    example = deepseek_v3_example()
    from transformers.integrations.finegrained_fp8 import FP8Linear
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3MLP

    bf16 = example.bf16_model(example.deepseek_config(tiny=True, layers=2), device)
    model = example.fp8_checkpoint_model(bf16, kernel, fp8_experts=True)
    mlps = [m for m in model.modules() if isinstance(m, DeepseekV3MLP)]
    linears = [m for m in model.modules() if isinstance(m, FP8Linear)]
    assert len(mlps) == 2 and len(linears) == 2 * 5 + 2 * 3  # attention per layer, dense MLP, shared expert
    namespace = {"model": model, "kernel_under_test": kernel}
    exec(card_recipe(), namespace)  # noqa: S102
    model = namespace["model"]
    for mlp in mlps:
        assert mlp.forward.__func__ is kernel.layers.FP8SplitGatedMLP.forward
    for linear in linears:
        assert linear.forward.__func__ is kernel.layers.FP8Linear.forward
    ids = torch.randint(0, 512, (2, 12), generator=torch.Generator().manual_seed(16)).to(device)
    with torch.no_grad():
        got = model(input_ids=ids).logits
        reference = bf16(input_ids=ids).logits  # the same weights, dequantized, in bfloat16
        called = ops_called(model, ids)
    # Every FP8 layer rounds its input to e4m3 (~2.5% rms each); through 2 layers of attention
    # and MLPs the logits of the random model stay within ~10% of the bfloat16 ones.
    error = ((got.float() - reference.float()).norm() / reference.float().norm()).item()
    assert error < 0.15, error
    ours = {"fp8_linear", "silu_and_mul_fp8_linear", "fp8_experts"}
    assert {f"{kernel._ops.ops.name}::{op}" for op in ours} <= called


@pytest.mark.kernels_ci
def test_kernelize_deepseek_v3_example_runs_tiny(device, tmp_path, capsys):
    """examples/deepseek_v3_fp8.py --tiny end to end (in this process: transformers is imported once),
    without peers: the transformers_fp8 run is skipped and says so; the JSON has the issue's schema."""
    example = deepseek_v3_example()
    out = tmp_path / "result.json"
    args = ["--device", device.type, "--tiny", "--layers", "2", "--steps", "4", "--reps", "1", "--context", "8"]
    example.main([*args, "--kernel-dir", str(kernel_dir()), "--out", str(out)])
    printed = capsys.readouterr().out
    assert "transformers_fp8 skipped:" in printed
    # each phase writes what it has, so a run stopped by a time limit keeps its rows
    for phase in ("models built", "prefill", "decode", "logits"):
        assert f"] {phase} done; {out} written" in printed, phase
    result = json.loads(out.read_text())
    assert result["complete"] is True
    assert (result["layers"], result["experts"], result["experts_dtype"]) == (2, 8, "float8_e4m3fn")
    assert [(r["phase"], r["batch"], r["tokens"]) for r in result["results"]] == [
        ("prefill", 1, 32), ("prefill", 2, 16), ("decode", 1, 1), ("decode", 2, 1),
    ]  # fmt: skip
    for row in result["results"]:
        ms = row["ms_per_token"]
        assert set(ms) == {"bf16", "transformers_fp8", "ours"} and ms["transformers_fp8"] is None
        assert ms["bf16"] > 0 and ms["ours"] > 0 and row["speedup_vs_transformers"] is None
        assert row["speedup_vs_bf16"] == pytest.approx(ms["bf16"] / ms["ours"], rel=1e-2)
    errors = result["logits"]["ours"]["rel_error"]
    assert len(errors) == 4 and result["logits_rel_error_max"] == max(errors) < 0.15
    assert 0 <= result["greedy_equal_steps"] <= 4


@pytest.mark.kernels_ci
def test_example_fp8_model_has_the_layout_transformers_allocates(kernel, device):
    """The example's FP8 model with FP8 routed experts too (as it builds it once the kernel runs
    them): no tensor left on the meta device, each FP8 weight and scale shaped as transformers'
    own FP8Linear / FP8Experts allocate them, and the bf16 model holding those weights dequantized."""
    example = deepseek_v3_example()
    from transformers.integrations.finegrained_fp8 import FP8Experts, FP8Linear

    config = example.deepseek_config(tiny=True, layers=2)
    bf16 = example.bf16_model(config, device)
    fp8 = example.fp8_checkpoint_model(bf16, kernel, fp8_experts=True)
    assert not [name for name, t in fp8.state_dict().items() if t.is_meta]
    experts = fp8.model.layers[1].mlp.experts
    linear = fp8.model.layers[0].mlp.down_proj
    assert isinstance(experts, FP8Experts) and isinstance(linear, FP8Linear)
    with torch.device("meta"):
        allocated = {"experts": FP8Experts(config, block_size=(128, 128)), "linear": FP8Linear(512, 256, (128, 128))}
    for name, module in {"experts": experts, "linear": linear}.items():
        for key, tensor in allocated[name].state_dict().items():
            assert module.state_dict()[key].shape == tensor.shape and module.state_dict()[key].dtype == tensor.dtype
    for weight, scale, dequantized in (
        (linear.weight, linear.weight_scale_inv, bf16.model.layers[0].mlp.down_proj.weight),
        (experts.gate_up_proj[3], experts.gate_up_proj_scale_inv[3], bf16.model.layers[1].mlp.experts.gate_up_proj[3]),
    ):
        blocks = scale.repeat_interleave(128, 0).repeat_interleave(128, 1)[: weight.shape[0], : weight.shape[1]]
        assert torch.equal((weight.float() * blocks).to(torch.bfloat16), dequantized)
