"""A transformers DeepSeek-V3 model with fine-grained FP8 weights, run three ways: in bfloat16,
on transformers' own FP8 path, and on the gemm kernel (the card's recipe), timed and compared.

The model is transformers' `DeepseekV3ForCausalLM` with DeepSeek-V3's widths (hidden 7168, 256
routed experts, top-8, moe_intermediate 2048, one shared expert, the first layer dense, MLA
attention) and --layers layers, random weights (seed 0) quantized to the format of
`FineGrainedFP8Config` checkpoints (float8_e4m3fn weights, one float32 scale per 128x128 block;
lm_head, embeddings, norms and routers stay bfloat16). Three runs of the same weights:
- bf16: the model in bfloat16 holding the FP8 weights dequantized (what the checkpoint means);
- transformers_fp8: the FP8 model as transformers runs it (`FP8Linear` on DeepGEMM, falling back
  to finegrained-fp8; experts on its default "grouped_mm"). It needs the peers
  kernels-community/deep-gemm and finegrained-fp8 built in a folder (--peers DIR, holding
  deep-gemm/ and finegrained-fp8/); without them, or on the CPU, this run is skipped and says so;
- ours: the same FP8 model switched onto the gemm kernel by `use_gemm_kernel` below, the lines of
  the kernel card's "transformers FP8 models" section (`FP8Linear` for every FP8 linear layer,
  `FP8SplitGatedMLP` for the dense and shared-expert MLPs).
The routed experts are FP8 in both FP8 runs: transformers' "grouped_mm" (its default) in the
transformers run, `gemm.fp8_experts_forward` registered in its `FP8ExpertsInterface` in ours.

Measured (CUDA: CUDA events, the runs interleaved call by call, median of --reps; CPU: wall time):
- prefill: 1 x 2048 and 8 x 512 tokens, one eager forward without cache;
- decode: batch 1, 8 and 64 with a static cache holding --context tokens, one decode step
  captured in a CUDA graph per run and batch and replayed (eager on the CPU, and where a capture
  fails: the row's "mode" says which); the eager step's time at batch 1 (synchronized) is the
  host time per step (`eager_step_ms`);
- logits: a 16-token prompt and --steps greedy steps of bf16; each FP8 run is fed bf16's tokens,
  and its logits are compared step by step (relative error, and the steps whose argmax is bf16's).
On CUDA the JSON also has the models' memory (`memory_gib`: the bf16 model, what the FP8 model
holds of its own, the peak), to choose --layers: as many as fit beside the bf16 copy. The JSON is
written after each phase (models built, prefill, decode, logits; "complete" says whether all ran),
each with the seconds since the start, so a run stopped by a time limit keeps what it measured.

    python examples/deepseek_v3_fp8.py --layers 4 [--peers .peers]   # CUDA; results/deepseek_v3_fp8-<gpu>.json
    python examples/deepseek_v3_fp8.py --device cpu --tiny --out smoke.json

The gemm kernel is loaded from a kernel folder with a build (default: kernels/gemm of this
repository, built with `kbuild build kernels/gemm`).
"""

from __future__ import annotations

import argparse
import copy
import datetime
import inspect
import json
import statistics
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from types import ModuleType

import kernels
import torch
import transformers
from fp8_block import graph_replay  # this folder: the block example's CUDA-graph capture
from kernels import (
    LocalLayerRepository,
    Mode,
    get_local_kernel,
    kernelize,
    replace_kernel_forward_from_hub,
    use_kernel_mapping,
)
from torch import nn
from transformers import DeepseekV3Config, DeepseekV3ForCausalLM, DynamicCache, FineGrainedFP8Config, StaticCache
from transformers.integrations import finegrained_fp8
from transformers.integrations.finegrained_fp8 import (
    FP8Experts,
    FP8ExpertsInterface,
    FP8Linear,
    replace_with_fp8_linear,
)
from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3MLP

OURS_EXPERTS = "kernels-community/gemm"  # the name our experts forward is registered under

GEMM_DIR = Path(__file__).resolve().parents[1] / "kernels" / "gemm"
RUNS = ("bf16", "transformers_fp8", "ours")
FULL = {
    "config": {"hidden_size": 7168, "n_routed_experts": 256, "num_experts_per_tok": 8, "moe_intermediate_size": 2048},
    "prefill": [(1, 2048), (8, 512)],
    "decode": [1, 8, 64],
}
TINY = {
    "config": {
        "vocab_size": 512,
        "hidden_size": 256,
        "intermediate_size": 512,
        "moe_intermediate_size": 128,
        "n_routed_experts": 8,
        "num_experts_per_tok": 2,
        "n_group": 2,
        "topk_group": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "q_lora_rank": 128,
        "kv_lora_rank": 128,
        "qk_rope_head_dim": 32,
        "qk_nope_head_dim": 64,
        "v_head_dim": 64,
        "max_position_embeddings": 256,
    },
    "prefill": [(1, 32), (2, 16)],
    "decode": [1, 2],
}
PROMPT_TOKENS = 16


def deepseek_config(tiny: bool, layers: int) -> DeepseekV3Config:
    """DeepSeek-V3's configuration (or the tiny one) with `layers` layers, the first dense."""
    sizes = (TINY if tiny else FULL)["config"]
    return DeepseekV3Config(**sizes, num_hidden_layers=layers, first_k_dense_replace=1, n_shared_experts=1)


def bf16_model(config: DeepseekV3Config, device: torch.device) -> DeepseekV3ForCausalLM:
    """The model with random weights (seed 0), made in bfloat16 on the device."""
    torch.manual_seed(0)
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with device:
            model = DeepseekV3ForCausalLM(config)
    finally:
        torch.set_default_dtype(default)
    return model.eval()


def fp8_checkpoint_model(model: DeepseekV3ForCausalLM, gemm: ModuleType, fp8_experts: bool) -> DeepseekV3ForCausalLM:
    """The model as transformers loads a `FineGrainedFP8Config` checkpoint of it: every linear
    layer but lm_head (and the routed experts, unless fp8_experts) a transformers `FP8Linear` /
    `FP8Experts` holding the weight quantized per 128x128 block. The bf16 model's weights become
    those blocks dequantized; the tensors left in bfloat16 are shared, not copied."""
    skip = ["lm_head"] if fp8_experts else ["lm_head", "mlp.experts"]
    quantization = FineGrainedFP8Config(weight_block_size=[128, 128], modules_to_not_convert=skip)
    with torch.device("meta"):
        fp8 = DeepseekV3ForCausalLM(copy.deepcopy(model.config))
    replace_with_fp8_linear(fp8, skip, quantization, pre_quantized=True)
    source = dict(model.named_modules())
    with torch.no_grad():
        for name, module in fp8.named_modules():
            bf16 = source[name]
            if isinstance(module, FP8Linear):
                _quantize_into(module, "weight", "weight_scale_inv", bf16.weight, gemm)
            elif isinstance(module, FP8Experts):
                for weight in ("gate_up_proj", "down_proj"):
                    _quantize_into(module, weight, f"{weight}_scale_inv", getattr(bf16, weight), gemm)
            else:
                for key, parameter in bf16.named_parameters(recurse=False):
                    setattr(module, key, parameter)
                for key, buffer in bf16.named_buffers(recurse=False):
                    module._buffers[key] = buffer
    return fp8.eval()


def _quantize_into(module: nn.Module, name: str, scale_name: str, weight: torch.Tensor, gemm: ModuleType) -> None:
    """Stores weight (one matrix, or one per expert) in module as FP8 (`name`) with its 128x128
    block scales (`scale_name`), and overwrites weight with that FP8 weight dequantized."""
    matrices = weight.view(-1, *weight.shape[-2:])
    quantized = [gemm.quantize_per_block(matrix) for matrix in matrices[:1]]
    values = torch.empty(weight.shape, dtype=quantized[0][0].dtype, device=weight.device)
    scales = torch.empty((*weight.shape[:-2], *quantized[0][1].shape), device=weight.device)
    rows, cols = weight.shape[-2:]
    for index, matrix in enumerate(matrices):
        q, scale = quantized.pop() if index == 0 else gemm.quantize_per_block(matrix)
        values.view(-1, rows, cols)[index] = q
        scales.view(-1, *scale.shape)[index] = scale
        full = scale.repeat_interleave(128, 0).repeat_interleave(128, 1)[:rows, :cols]
        matrix.copy_(q.float() * full)
    setattr(module, name, nn.Parameter(values, requires_grad=False))
    setattr(module, scale_name, nn.Parameter(scales, requires_grad=False))


def use_gemm_kernel(model: nn.Module, repository: Callable[[str], object], gemm: ModuleType) -> nn.Module:
    """The card's lines: transformers' FP8 linear layers and DeepseekV3 MLPs onto the gemm kernel, and
    its routed experts onto gemm.fp8_experts_forward through transformers' FP8ExpertsInterface."""
    replace_kernel_forward_from_hub(FP8Linear, "FP8Linear")
    replace_kernel_forward_from_hub(DeepseekV3MLP, "FP8SplitGatedMLP")
    mapping = {name: {model.device.type: repository(name)} for name in ("FP8Linear", "FP8SplitGatedMLP")}
    with use_kernel_mapping(mapping):
        model = kernelize(model, mode=Mode.INFERENCE)
    FP8ExpertsInterface.register(OURS_EXPERTS, gemm.fp8_experts_forward)
    model.set_experts_implementation(OURS_EXPERTS)
    return model


class Switch:
    """The FP8 model's two runs: the forwards kernelize gave its modules (ours), or none of them
    (transformers' own)."""

    def __init__(self, model: nn.Module, gemm_dir: Path, gemm: ModuleType) -> None:
        self.model = model
        use_gemm_kernel(model, lambda name: LocalLayerRepository(repo_path=gemm_dir, layer_name=name), gemm)
        self.kernel_forwards = {m: m.__dict__["forward"] for m in model.modules() if "forward" in m.__dict__}
        if not self.kernel_forwards:
            raise RuntimeError(f"kernelize put no forward of {gemm_dir} into the model")

    def ours(self, on: bool) -> None:
        # The routed experts: the kernel's forward, or transformers' default ("grouped_mm").
        self.model.set_experts_implementation(OURS_EXPERTS if on else "grouped_mm")
        for module, forward in self.kernel_forwards.items():
            if on:
                module.forward = forward
            else:
                module.__dict__.pop("forward", None)


def load_peers(peers: Path | None, device: torch.device) -> str | None:
    """Hands transformers the deep-gemm and finegrained-fp8 builds in peers; returns why the
    transformers_fp8 run is skipped, or None."""
    if device.type != "cuda":
        return "transformers_fp8 skipped: transformers' FP8 kernels (DeepGEMM, finegrained-fp8) run on CUDA only"
    if peers is None:
        return (
            "transformers_fp8 skipped: no --peers DIR (a folder with kernels-community/deep-gemm and "
            "finegrained-fp8 built by kbuild, as deep-gemm/ and finegrained-fp8/)"
        )
    from transformers.integrations import deepgemm, hub_kernels

    for name in ("deep-gemm", "finegrained-fp8"):
        if not (peers / name / "build").is_dir():
            return f"transformers_fp8 skipped: {peers / name} has no build (kbuild build {peers / name})"
        hub_kernels._KERNEL_MODULE_MAPPING[name] = get_local_kernel(peers / name)
    # transformers 5.17 accepts kernels 0.16 only; the peers are loaded above, so its check is moot.
    deepgemm.is_kernels_available = finegrained_fp8.is_kernels_available = lambda *a, **k: True
    deepgemm.is_deepgemm_loadable(raise_error=True)
    return None


def time_ms(fns: list[Callable[[], object]], device: torch.device, reps: int) -> list[float]:
    """Median milliseconds of each fn over reps calls, interleaved call by call (order rotating)."""
    for fn in fns:
        fn()
    times: list[list[float]] = [[] for _ in fns]
    for rep in range(reps):
        for i in range(len(fns)):
            which = (rep + i) % len(fns)
            if device.type == "cuda":
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fns[which]()
                end.record()
                end.synchronize()
                times[which].append(start.elapsed_time(end))
            else:
                begin = time.perf_counter()
                fns[which]()
                times[which].append((time.perf_counter() - begin) * 1e3)
    return [statistics.median(t) for t in times]


def captured(step: Callable[[], object]) -> Callable[[], object]:
    """step captured in a CUDA graph as examples/fp8_block.py captures; returns its replay."""
    return graph_replay(lambda _: step(), torch.empty(0))


class Runner:
    """The runs present, each a model and a way to put it in its state before it is called."""

    def __init__(self, bf16: nn.Module, fp8: nn.Module, switch: Switch, runs: list[str]) -> None:
        self.runs = runs
        self.models = {"bf16": bf16, "transformers_fp8": fp8, "ours": fp8}
        self.switch = switch

    def prepared(self, run: str) -> nn.Module:
        if run != "bf16":
            self.switch.ours(run == "ours")
        return self.models[run]

    def in_state(self, run: str, fn: Callable[[], object]) -> Callable[[], object]:
        """fn, called with the run's model in its state (the state set before each call)."""

        def call() -> object:
            self.prepared(run)
            return fn()

        return call


def prefill_rows(runner: Runner, sizes: list[tuple[int, int]], vocab: int, device: torch.device, reps: int) -> list:
    rows = []
    generator = torch.Generator().manual_seed(1)
    for batch, tokens in sizes:
        ids = torch.randint(0, vocab, (batch, tokens), generator=generator).to(device)
        fns = [runner.in_state(run, partial(runner.models[run], input_ids=ids, use_cache=False)) for run in runner.runs]
        ms = time_ms(fns, device, reps)
        per_token = {run: m / (batch * tokens) for run, m in zip(runner.runs, ms, strict=True)}
        rows.append(_row("prefill", batch, tokens, per_token, "eager"))
    return rows


def decode_rows(
    runner: Runner, batches: list[int], context: int, vocab: int, device: torch.device, reps: int
) -> tuple[list, dict[str, float]]:
    """One decode step per run and batch after `context` tokens in a static cache, timed as a CUDA
    graph of it on CUDA (eagerly on the CPU); also the eager step's milliseconds at the first batch.
    Each call appends to the cache (transformers' static cache counts on the device), so it holds
    a slot for every call; the step's position stays `context`."""
    rows, eager_ms = [], {}
    generator = torch.Generator().manual_seed(2)
    for batch in batches:
        prompt = torch.randint(0, vocab, (batch, context), generator=generator).to(device)
        token = torch.randint(0, vocab, (batch, 1), generator=generator).to(device)
        position = torch.full((batch, 1), context, device=device)
        steps = []
        for run in runner.runs:
            model = runner.prepared(run)
            cache = {_cache_argument(model): StaticCache(config=model.config, max_cache_len=context + 2 * reps + 8)}
            model(input_ids=prompt, use_cache=True, **cache)
            step = partial(model, input_ids=token, position_ids=position, use_cache=True, **cache)
            steps.append(runner.in_state(run, step))
        ms = time_ms(steps, device, reps)
        if batch == batches[0]:
            eager_ms = dict(zip(runner.runs, ms, strict=True))
        mode = "eager"
        if device.type == "cuda":
            try:
                graphs = [captured(step) for step in steps]
            except RuntimeError as err:  # the other measurements still count; the row says "eager"
                print(f"decode batch {batch}: no CUDA graph ({' '.join(str(err).split())[:300]}); eager times kept")
            else:
                ms, mode = time_ms(graphs, device, reps), "graph"
        per_token = {run: m / batch for run, m in zip(runner.runs, ms, strict=True)}
        rows.append(_row("decode", batch, 1, per_token, mode))
    return rows, eager_ms


def _cache_argument(model: nn.Module) -> str:
    """The cache's keyword: `past_key_values` up to transformers 5.17, `cache` in later 5.x."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def _row(phase: str, batch: int, tokens: int, ms_per_token: dict[str, float], mode: str) -> dict:
    full = {run: (round(ms_per_token[run], 6) if run in ms_per_token else None) for run in RUNS}
    ours = ms_per_token["ours"]
    row = {
        "phase": phase,
        "batch": batch,
        "tokens": tokens,
        "mode": mode,
        "ms_per_token": full,
        "tokens_per_second": {run: (round(1e3 / ms, 1) if ms else None) for run, ms in full.items()},
        "speedup_vs_transformers": (
            round(ms_per_token["transformers_fp8"] / ours, 3) if "transformers_fp8" in ms_per_token else None
        ),
        "speedup_vs_bf16": round(ms_per_token["bf16"] / ours, 3),
    }
    print(
        f"{phase:7s} batch {batch:3d} x {tokens:5d}: "
        + "  ".join(f"{r} {m:.4f} ms/token" for r, m in full.items() if m)
    )
    return row


def greedy_logits(
    runner: Runner, run: str, prompt: torch.Tensor, steps: int, tokens: list[torch.Tensor] | None
) -> list:
    """Last-position logits of the prompt and of steps - 1 more tokens: the run's own greedy ones,
    or those given (bf16's)."""
    model = runner.prepared(run)
    cache = {_cache_argument(model): DynamicCache(config=model.config)}
    logits = [model(input_ids=prompt, use_cache=True, **cache).logits[:, -1].float()]
    for step in range(steps - 1):
        token = tokens[step] if tokens is not None else logits[-1].argmax(-1, keepdim=True)
        logits.append(model(input_ids=token, use_cache=True, **cache).logits[:, -1].float())
    return logits


def compare_logits(runner: Runner, vocab: int, steps: int, device: torch.device) -> dict:
    prompt = torch.randint(0, vocab, (1, PROMPT_TOKENS), generator=torch.Generator().manual_seed(3)).to(device)
    reference = greedy_logits(runner, "bf16", prompt, steps, None)
    tokens = [step.argmax(-1, keepdim=True) for step in reference]
    compared = {}
    for run in runner.runs[1:]:
        logits = greedy_logits(runner, run, prompt, steps, tokens)
        errors = [((got - ref).norm() / ref.norm()).item() for got, ref in zip(logits, reference, strict=True)]
        same = [torch.equal(got.argmax(-1, keepdim=True), token) for got, token in zip(logits, tokens, strict=True)]
        equal_steps = same.index(False) if False in same else len(same)
        compared[run] = {"rel_error": [round(e, 5) for e in errors], "greedy_equal_steps": equal_steps}
        print(f"logits {run}: rel. error max {max(errors):.4f}, greedy tokens equal to bf16's for {equal_steps} steps")
    return compared


def run(args: argparse.Namespace) -> dict:
    """The three runs, phase by phase; after each phase the JSON so far is written to args.out
    ("complete": false until the end), so a run stopped by a time limit keeps what it measured."""
    began = time.perf_counter()
    device = torch.device(args.device)
    sizes = TINY if args.tiny else FULL
    gemm = get_local_kernel(args.kernel_dir)
    config = deepseek_config(args.tiny, args.layers)
    bf16 = bf16_model(config, device)
    fp8 = fp8_checkpoint_model(bf16, gemm, fp8_experts=True)
    skipped = load_peers(args.peers, device)
    if skipped:
        print(skipped)
    runner = Runner(
        bf16, fp8, Switch(fp8, args.kernel_dir, gemm), [r for r in RUNS if not (skipped and r == "transformers_fp8")]
    )
    report: dict = {
        "example": "examples/deepseek_v3_fp8.py",
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "kernels": kernels.__version__,
        "layers": config.num_hidden_layers,
        "experts": config.n_routed_experts,
        "experts_dtype": "float8_e4m3fn",
        "decode_context": args.context,
        "reps": args.reps,
        "memory_gib": _memory(bf16, fp8, device),
        "skipped": skipped,
        "complete": False,
        "results": [],
    }

    def phase_done(name: str) -> None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")
        print(f"[{time.perf_counter() - began:.0f} s] {name} done; {args.out} written", flush=True)

    phase_done("models built")
    with torch.no_grad():
        report["results"] += prefill_rows(runner, sizes["prefill"], config.vocab_size, device, args.reps)
        phase_done("prefill")
        decode, eager_ms = decode_rows(runner, sizes["decode"], args.context, config.vocab_size, device, args.reps)
        report["results"] += decode
        report["eager_step_ms"] = {run: round(ms, 4) for run, ms in eager_ms.items()}
        phase_done("decode")
        logits = compare_logits(runner, config.vocab_size, args.steps, device)
    report["logits"] = logits
    report["logits_rel_error_max"] = round(max(logits["ours"]["rel_error"]), 5)
    report["greedy_equal_steps"] = logits["ours"]["greedy_equal_steps"]
    report["memory_gib"] = _memory(bf16, fp8, device)
    report["complete"] = True
    phase_done("logits")
    return report


def _memory(bf16: nn.Module, fp8: nn.Module, device: torch.device) -> dict[str, float] | None:
    """GiB of the bf16 model, of what the FP8 model holds of its own, and the peak so far (CUDA)."""
    if device.type != "cuda":
        return None
    shared = {t.data_ptr() for t in bf16.state_dict().values()}
    own = sum(t.nbytes for t in fp8.state_dict().values() if t.data_ptr() not in shared)
    memory = {"bf16_model": sum(t.nbytes for t in bf16.state_dict().values()) / 2**30, "fp8_model_own": own / 2**30}
    memory["peak_allocated"] = torch.cuda.max_memory_allocated(device) / 2**30
    return {key: round(gib, 2) for key, gib in memory.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--tiny", action="store_true", help="hidden 256, 8 experts, small prompts (smoke test)")
    parser.add_argument("--layers", type=int, default=4, help="decoder layers, the first dense (default 4)")
    parser.add_argument("--context", type=int, default=256, help="tokens in the static cache before a decode step")
    parser.add_argument("--steps", type=int, default=32, help="greedy steps compared against bf16 (default 32)")
    parser.add_argument("--reps", type=int, default=20, help="timed calls per measurement (median)")
    parser.add_argument("--peers", type=Path, help="folder with built deep-gemm/ and finegrained-fp8/")
    parser.add_argument("--kernel-dir", type=Path, default=GEMM_DIR, help="gemm kernel folder with build/")
    parser.add_argument(
        "--out", type=Path, help="JSON file (default: gemm's benchmarks/results/deepseek_v3_fp8-<gpu>.json)"
    )
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device (use --device cpu --tiny for a smoke test)")
    if args.layers < 2:
        parser.error("--layers: at least 2 (the first layer is dense, the others are MoE layers)")
    if args.out is None:
        device = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
        name = device.lower().removeprefix("nvidia ").split()[0]
        args.out = GEMM_DIR / "benchmarks" / "results" / f"deepseek_v3_fp8-{name}.json"
    run(args)


if __name__ == "__main__":
    main()
