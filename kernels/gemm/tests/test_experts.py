"""The mixture-of-experts ops: routing, the grouped FP8 GEMMs (contiguous and masked layouts),
the combine, and fp8_experts / fp8_experts_forward (transformers' FP8Experts on our kernels).

References are float64 computations on the dequantized FP8 values: the grouped GEMMs against the
dense per-expert product of the same quantized operands (they must agree to bf16 rounding), the
whole block against the same pipeline in float64 (its quantization steps taken from our own
quantize op, tested in test_quantize.py) and against bf16 experts on the dequantized weights
(FP8's own error, about 0.045).
"""

import pytest
import torch
from gpu_kernels import gpu_kernels_run, hopper_dispatch

BLOCK = 128
TILES_KERNEL = "fp8_grouped_tiles_kernel"
STREAMING_KERNEL = "fp8_grouped_kernel"


def run_on_tiles_where_hopper(kernel, fn, device, launches) -> None:
    """fn(); through the Hopper path's dispatch it must run the grouped GEMM on the wgmma tiles only, in
    `launches` launches of distinct tile shapes (3 from 64 rows per expert: the 192-, 128- and 64-row tiles)."""
    if hopper_dispatch(kernel, device):
        names = gpu_kernels_run(fn)
        tiles = [name for name in names if TILES_KERNEL in name]
        assert len(tiles) == launches and len(set(tiles)) == launches, names
        assert not any(STREAMING_KERNEL in name for name in names), names
    else:
        fn()


def dequantize_weights(w: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """(E, N, K) FP8 and (E, ceil(N/128), ceil(K/128)) scales -> float64 (E, N, K)."""
    e, n, k = w.shape
    s = scale.double().repeat_interleave(BLOCK, 1).repeat_interleave(BLOCK, 2)[:, :n, :k]
    return w.double() * s


def dequantize_rows(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """(M, K) FP8 and (M, ceil(K/128)) scales -> float64 (M, K)."""
    return q.double() * scale.double().repeat_interleave(BLOCK, 1)[:, : q.shape[1]]


def random_experts(kernel, experts, n, k, device, fp8, rng):
    w = torch.randn(experts, n, k, generator=rng, device=device) / k**0.5
    parts = [kernel.quantize_per_block(w[e], BLOCK, fp8) for e in range(experts)]
    return torch.stack([q for q, _ in parts]), torch.stack([s for _, s in parts])


def routing(tokens, top_k, experts, device, rng, skew=False):
    if skew:  # most slots on expert 0
        ids = torch.zeros(tokens, top_k, dtype=torch.long, device=device)
        ids[:, 1:] = torch.randint(0, experts, (tokens, top_k - 1), generator=rng, device=device)
    else:
        scores = torch.rand(tokens, experts, generator=rng, device=device)
        ids = scores.topk(top_k, dim=1).indices
    weights = torch.rand(tokens, top_k, generator=rng, device=device)
    return ids, weights / weights.sum(1, keepdim=True)


def sparse_counts(experts: int, owned: dict[int, int]) -> list[int]:
    """Row counts of `experts` experts, 0 but for the experts in `owned`."""
    return [owned.get(e, 0) for e in range(experts)]


# Few experts with rows among 600: Hopper's tiles find each tile's expert by scanning the counts or
# offsets 32 experts at a time, from the last expert found on; these owners sit in the first 32, on both
# sides of a step's end (287 | 288), after empty runs of many steps and at the very end.
SPARSE_OWNERS = {5: 3, 37: 1, 38: 9, 287: 6, 288: 2, 300: 2, 301: 5, 590: 1, 599: 4}
SPARSE_TALL_OWNERS = {5: 200, 37: 130, 287: 64, 288: 9, 301: 1, 595: 70, 599: 250}  # a capacity of 200


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    return ((out.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()


# ---- routing ----


@pytest.mark.kernels_ci
@pytest.mark.parametrize("id_dtype", [torch.int64, torch.int32])
def test_route_sorts_slots_by_expert(kernel, device, rng, id_dtype):
    tokens, top_k, experts = 37, 4, 9
    ids, _ = routing(tokens, top_k, experts, device, rng)
    ids[3, 1] = experts  # "no expert"
    offsets, row_token, slot_row = kernel.moe_route(ids.to(id_dtype), experts)
    flat = ids.flatten().cpu()
    counts = torch.bincount(flat[flat < experts], minlength=experts)
    assert offsets.cpu().tolist() == [0, *torch.cumsum(counts, 0).tolist()]
    slot_row, row_token = slot_row.cpu(), row_token.cpu()
    assert slot_row[3 * top_k + 1] == -1
    for s in range(tokens * top_k):
        if flat[s] == experts:
            continue
        row = slot_row[s].item()
        assert row_token[row] == s // top_k
        assert offsets[flat[s]] <= row < offsets[flat[s] + 1]
    rows = slot_row[slot_row >= 0]
    assert sorted(rows.tolist()) == list(range(int(offsets[-1])))


@pytest.mark.kernels_ci
def test_route_sorts_thousands_of_slots(kernel, device, rng):
    """Many slots per thread of the one-CTA GPU routing (7,007 slots on 256 threads), "no expert"
    slots among them."""
    tokens, top_k, experts = 1001, 7, 300
    ids, _ = routing(tokens, top_k, experts, device, rng)
    ids[::13, 2] = experts
    offsets, row_token, slot_row = (t.cpu() for t in kernel.moe_route(ids, experts))
    flat = ids.flatten().cpu()
    routed = flat < experts
    counts = torch.bincount(flat[routed], minlength=experts)
    assert offsets.tolist() == [0, *torch.cumsum(counts, 0).tolist()]
    assert (slot_row[~routed] == -1).all()
    rows = slot_row[routed].long()
    assert sorted(rows.tolist()) == list(range(int(offsets[-1])))
    assert (row_token[rows] == torch.arange(tokens * top_k)[routed] // top_k).all()
    assert ((offsets[flat[routed]] <= rows) & (rows < offsets[flat[routed] + 1])).all()


@pytest.mark.kernels_ci
@pytest.mark.parametrize("hidden", [72, 70])  # 16-byte rows, and the element-by-element path
def test_combine_adds_eleven_slots_per_token(kernel, device, rng, hidden):
    """top_k 11 (more than transformers' models use); rows -1 add nothing."""
    tokens, top_k, row_count = 5, 11, 40
    rows = torch.randn(row_count, hidden, generator=rng, device=device).to(torch.bfloat16)
    slot_row = torch.randint(0, row_count, (tokens * top_k,), generator=rng, device=device).to(torch.int32)
    slot_row[3] = -1
    slot_row[20] = -1
    weights = torch.rand(tokens, top_k, generator=rng, device=device)
    out = kernel.moe_combine(rows, slot_row, weights, torch.float32).cpu()
    expected = torch.zeros(tokens, hidden, dtype=torch.float32)
    for t in range(tokens):
        for j in range(top_k):
            row = int(slot_row[t * top_k + j])
            if row >= 0:
                expected[t] += weights[t, j].cpu() * rows[row].cpu().float()
    torch.testing.assert_close(out, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.kernels_ci
def test_route_refuses_ids_out_of_range_on_cpu(kernel):
    ids = torch.tensor([[0, 5]])
    with pytest.raises(RuntimeError, match=r"top_k_index must hold expert ids 0\.\.3 \(or 4 for no expert\)"):
        kernel.moe_route(ids, 4)
    with pytest.raises(RuntimeError, match="expert ids"):
        kernel.moe_route(torch.tensor([[-1, 0]]), 4)


# ---- the grouped GEMM ----


def dense_reference(kernel, a, a_scale, w, w_scale, expert_of_row):
    deq_w = dequantize_weights(w, w_scale)
    deq_a = dequantize_rows(a, a_scale)
    return torch.stack([deq_a[r] @ deq_w[e].T for r, e in enumerate(expert_of_row)]) if len(expert_of_row) else None


@pytest.mark.kernels_ci
@pytest.mark.parametrize(
    "n,k,counts",
    [
        (256, 384, [3, 0, 17, 1, 0]),  # empty experts, one with more rows than a token tile
        (192, 200, [3, 0, 17, 1, 0]),
        (256, 256, [40, 0, 35]),  # many rows per expert: one dense GEMM per expert outside graphs
    ],
)
def test_grouped_contiguous_matches_dense_per_expert(kernel, device, fp8_dtype, rng, path, n, k, counts):
    experts = len(counts)
    rows = sum(counts)
    w, w_scale = random_experts(kernel, experts, n, k, device, fp8_dtype, rng)
    x = torch.randn(rows + 4, k, generator=rng, device=device)
    a, a_scale = kernel.quantize_per_token_group(x, BLOCK, fp8_dtype)
    row_index = torch.randperm(rows + 4, generator=torch.Generator().manual_seed(7))[:rows].to(device, torch.int32)
    offsets = torch.tensor([0, *torch.cumsum(torch.tensor(counts), 0).tolist()], dtype=torch.int32, device=device)
    out = torch.full((rows, n), float("nan"), dtype=torch.bfloat16, device=device)
    kernel.grouped_gemm_nt_contiguous(a, a_scale, w, w_scale, offsets, row_index=row_index, out=out)
    expert_of_row = [e for e, c in enumerate(counts) for _ in range(c)]
    gathered = row_index.long().cpu()
    ref = dense_reference(kernel, a.cpu()[gathered], a_scale.cpu()[gathered], w.cpu(), w_scale.cpu(), expert_of_row)
    torch.testing.assert_close(out.double().cpu(), ref, rtol=2**-7, atol=1e-3)


@pytest.mark.kernels_ci
@pytest.mark.parametrize(
    "n,k,counts,launches",
    [
        (384, 512, [20, 0, 50, 9, 3], 1),  # 64-row tiles, partial ones (also in N), an expert without rows
        (256, 384, [150, 2, 3, 1], 1),  # 64-row tiles only (under 64 rows per expert), three for one expert
        # from 64 rows per expert, tiles by expert: 70 rows on a 128-row tile, 130 on a 192-row one, 9 on a
        # 64-row tile, 195 on two 128-row tiles
        (384, 512, [70, 0, 130, 9, 195], 3),
        (200, 256, [300, 0, 140, 128], 3),  # N not a multiple of the tiles' columns
        # 192-row tiles and one or two 128-row ones: 300 = 192 + 108, 200 = 128 + 72, 140 on a 192-row
        # tile, 128 on a 128-row one, 330 = 192 + 138; 64 and 1 row on 64-row tiles
        (256, 256, [300, 0, 200, 140, 128, 64, 1, 330], 3),
        (128, 256, [512, 448, 3, 0], 3),  # 512 = 2 x 192 + 128, 448 = 192 + 2 x 128
        (136, 256, [192, 384, 0, 129], 3),  # full 192-row tiles only: 192, 384 = 2 x 192; 129 on one
        (128, 128, sparse_counts(600, SPARSE_OWNERS), 1),
    ],
)
def test_grouped_contiguous_on_tiles_matches_dense_per_expert(
    kernel, device, fp8_dtype, rng, path, n, k, counts, launches
):
    """Many rows per expert, A's rows in expert order (no row_index): on Hopper the wgmma tiles, each
    M-tile cut at its expert's last row; rows outside the offsets are left as they were."""
    experts, first = len(counts), 4
    rows = first + sum(counts) + 4
    w, w_scale = random_experts(kernel, experts, n, k, device, fp8_dtype, rng)
    x = torch.randn(rows, k, generator=rng, device=device)
    a, a_scale = kernel.quantize_per_token_group(x, BLOCK, fp8_dtype)
    offsets = torch.tensor([first, *(first + torch.cumsum(torch.tensor(counts), 0)).tolist()], dtype=torch.int32)
    offsets = offsets.to(device)
    out = torch.full((rows, n), 7.0, dtype=torch.bfloat16, device=device)
    run_on_tiles_where_hopper(
        kernel, lambda: kernel.grouped_gemm_nt_contiguous(a, a_scale, w, w_scale, offsets, out=out), device, launches
    )
    expert_of_row = [e for e, c in enumerate(counts) for _ in range(c)]
    owned = slice(first, rows - 4)
    ref = dense_reference(kernel, a.cpu()[owned], a_scale.cpu()[owned], w.cpu(), w_scale.cpu(), expert_of_row)
    torch.testing.assert_close(out[owned].double().cpu(), ref, rtol=2**-7, atol=1e-3)
    assert (out[:first] == 7.0).all() and (out[rows - 4 :] == 7.0).all(), "rows outside the offsets were written"


@pytest.mark.kernels_ci
def test_grouped_contiguous_takes_an_expanded_a(kernel, device, fp8_dtype, rng, path):
    """A whose rows all alias one row (expand(): row stride 0, which TMA cannot read): the same
    results as its copy (Hopper's tiles leave it to the other paths)."""
    w, w_scale = random_experts(kernel, 3, 128, 256, device, fp8_dtype, rng)
    a1, s1 = kernel.quantize_per_token_group(torch.randn(1, 256, generator=rng, device=device), BLOCK, fp8_dtype)
    a, a_scale = a1.expand(32, 256), s1.expand(32, 2)
    offsets = torch.tensor([0, 20, 20, 32], dtype=torch.int32, device=device)
    out = kernel.grouped_gemm_nt_contiguous(a, a_scale, w, w_scale, offsets)
    copied = kernel.grouped_gemm_nt_contiguous(a.contiguous(), a_scale.contiguous(), w, w_scale, offsets)
    torch.testing.assert_close(out, copied, rtol=2**-7, atol=1e-3)


@pytest.mark.kernels_ci
@pytest.mark.parametrize(
    "capacity,n,k,counts,scales,launches",
    [
        (40, 256, 384, [0, 40, 9, 100], "m-contiguous", 1),
        (9, 128, 256, [0, 9, 2, 20], "row-major", 1),
        (200, 128, 256, [0, 200, 130, 64, 250], "m-contiguous", 3),  # 192-, 128- and 64-row tiles
        (200, 128, 128, sparse_counts(600, SPARSE_TALL_OWNERS), "m-contiguous", 3),
        (9, 128, 128, sparse_counts(600, SPARSE_OWNERS), "m-contiguous", 1),
    ],
)
def test_grouped_masked_writes_only_the_counted_rows(
    kernel, device, fp8_dtype, rng, path, capacity, n, k, counts, scales, launches
):
    """The masked layout, a count past the capacity clamped to it; A scales as quantized (M-contiguous:
    strides (capacity, 1, E * C)) or copied row-major. On Hopper's default path: the tiles."""
    experts = len(counts)
    w, w_scale = random_experts(kernel, experts, n, k, device, fp8_dtype, rng)
    x = torch.randn(experts * capacity, k, generator=rng, device=device)
    a, a_scale = kernel.quantize_per_token_group(x, BLOCK, fp8_dtype)
    a3 = a.view(experts, capacity, k)
    s3 = (a_scale if scales == "m-contiguous" else a_scale.contiguous()).view(experts, capacity, -1)
    counted = torch.tensor(counts, dtype=torch.int32, device=device)
    out = torch.full((experts, capacity, n), 7.0, dtype=torch.bfloat16, device=device)
    run_on_tiles_where_hopper(
        kernel, lambda: kernel.grouped_gemm_nt_masked(a3, s3, w, w_scale, counted, out=out), device, launches
    )
    deq_w = dequantize_weights(w.cpu(), w_scale.cpu())
    deq_a = dequantize_rows(a.cpu(), a_scale.cpu()).view(experts, capacity, k)
    for e, c in enumerate(min(count, capacity) for count in counts):
        torch.testing.assert_close(out[e, :c].double().cpu(), deq_a[e, :c] @ deq_w[e].T, rtol=2**-7, atol=1e-3)
        assert (out[e, c:] == 7.0).all(), f"expert {e}: rows past its count were written"


# ---- the whole block ----


def pipeline_reference(kernel, x, ids, weights, w1, s1, w2, s2, fp8, gated=True):
    """The kernel's own pipeline in float64: quantize x, gate/up, round to bf16, SiLU-and-mul and
    quantize (our op; not `gated`: SiLU in bf16, then our quantization), down, round to bf16, weighted
    sum in float64."""
    experts = w1.shape[0]
    xq, xs = kernel.quantize_per_token_group(x, BLOCK, fp8)
    deq_x = dequantize_rows(xq, xs)
    d1, d2 = dequantize_weights(w1, s1), dequantize_weights(w2, s2)
    out = torch.zeros(x.shape, dtype=torch.float64)
    for t in range(x.shape[0]):
        for j in range(ids.shape[1]):
            e = int(ids[t, j])
            if not 0 <= e < experts:
                continue
            h = (deq_x[t] @ d1[e].T).to(torch.bfloat16)
            if gated:
                hq, hs = kernel.silu_and_mul_quantize(h[None], fp8)
            else:
                hq, hs = kernel.quantize_per_token_group(torch.nn.functional.silu(h[None]), BLOCK, fp8)
            y = (dequantize_rows(hq, hs)[0] @ d2[e].T).to(torch.bfloat16)
            out[t] += float(weights[t, j]) * y.double()
    return out


def bf16_experts(x, ids, weights, w1, s1, w2, s2, gated=True):
    """Experts in bf16 on the dequantized weights (what the FP8 checkpoint approximates)."""
    experts, inner = w1.shape[0], w1.shape[1] // 2 if gated else w1.shape[1]
    d1 = dequantize_weights(w1, s1).to(torch.bfloat16)
    d2 = dequantize_weights(w2, s2).to(torch.bfloat16)
    out = torch.zeros(x.shape, dtype=torch.float64)
    xb = x.to(torch.bfloat16)
    for t in range(x.shape[0]):
        for j in range(ids.shape[1]):
            e = int(ids[t, j])
            if not 0 <= e < experts:
                continue
            h = xb[t] @ d1[e].T
            act = torch.nn.functional.silu(h[:inner]) * h[inner:] if gated else torch.nn.functional.silu(h)
            y = act @ d2[e].T
            out[t] += float(weights[t, j]) * y.double()
    return out


@pytest.mark.kernels_ci
@pytest.mark.parametrize(
    "tokens,top_k,experts,hidden,inner,skew",
    [
        (1, 2, 4, 256, 128, False),
        (13, 3, 6, 384, 256, False),
        (24, 4, 5, 256, 192, True),
        (9, 1, 3, 200, 136, False),
        # 64 rows per expert (63 for one): on Hopper the three launches, only the 64-row one with tiles
        (64, 4, 4, 256, 128, False),
        (12, 10, 16, 256, 128, False),  # top_k 10: the quantization's scatter takes two batches of rows per token
        # skewed: expert 0 about 410 rows (a 192-row and two 128-row tiles), the others about 154 (a 192-row
        # tile each): the 192- and 128-row tiles against the reference
        (256, 4, 5, 256, 128, True),
    ],
)
def test_fp8_experts_matches_its_pipeline_and_bf16(
    kernel, device, fp8_dtype, rng, path, tokens, top_k, experts, hidden, inner, skew
):
    w1, s1 = random_experts(kernel, experts, 2 * inner, hidden, device, fp8_dtype, rng)
    w2, s2 = random_experts(kernel, experts, hidden, inner, device, fp8_dtype, rng)
    x = torch.randn(tokens, hidden, generator=rng, device=device).to(torch.bfloat16)
    ids, weights = routing(tokens, top_k, experts, device, rng, skew=skew)
    if tokens > 5:
        ids[5, 0] = experts  # a slot without an expert adds nothing
    out = kernel.fp8_experts(x, ids, weights, w1, s1, w2, s2)
    assert out.dtype == torch.bfloat16 and out.shape == x.shape
    cpu = [t.cpu() for t in (x, ids, weights, w1, s1, w2, s2)]
    ref = pipeline_reference(kernel, *cpu, fp8_dtype)
    # The gate/up results are rounded to bf16 and quantized again to FP8 (steps of 6-12 %): where the
    # kernel's fp32 sum and the float64 reference round an element of h to neighbouring bf16 values,
    # the two quantize it to neighbouring FP8 codes. On Hopper's wgmma tiles (about 14 mantissa bits
    # inside a 128-deep block) such flips took one token's output 1.4 % from the reference (H200);
    # a wrong scale or a row of another expert would be 10-100 % off.
    assert relative_error(out.cpu(), ref) < 0.03
    # FP8's own error (two activation quantizations): 0.042-0.047 at the benchmark's sizes
    # (examples/fp8_moe.py records it); these few outputs scatter around that, so 0.06 here.
    assert relative_error(out.cpu(), bf16_experts(*cpu)) <= 0.06


@pytest.mark.kernels_ci
# The first GEMM's output narrower than hidden (its bf16 buffer shares the down projection's); 256 rows per
# expert: on Hopper the three launches.
@pytest.mark.parametrize("tokens,top_k,experts,hidden,inner", [(13, 3, 6, 384, 128), (256, 4, 4, 256, 128)])
def test_fp8_experts_without_gate_matches_its_pipeline_and_bf16(
    kernel, device, fp8_dtype, rng, tokens, top_k, experts, hidden, inner
):
    """gated=False: one up projection, SiLU alone between the projections."""
    w1, s1 = random_experts(kernel, experts, inner, hidden, device, fp8_dtype, rng)
    w2, s2 = random_experts(kernel, experts, hidden, inner, device, fp8_dtype, rng)
    x = torch.randn(tokens, hidden, generator=rng, device=device).to(torch.bfloat16)
    ids, weights = routing(tokens, top_k, experts, device, rng)
    out = kernel.fp8_experts(x, ids, weights, w1, s1, w2, s2, gated=False)
    cpu = [t.cpu() for t in (x, ids, weights, w1, s1, w2, s2)]
    assert relative_error(out.cpu(), pipeline_reference(kernel, *cpu, fp8_dtype, gated=False)) < 0.03
    assert relative_error(out.cpu(), bf16_experts(*cpu, gated=False)) <= 0.06


@pytest.mark.kernels_ci
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_fp8_experts_returns_the_input_dtype(kernel, device, fp8_dtype, rng, dtype):
    experts, hidden, inner = 3, 128, 128
    w1, s1 = random_experts(kernel, experts, 2 * inner, hidden, device, fp8_dtype, rng)
    w2, s2 = random_experts(kernel, experts, hidden, inner, device, fp8_dtype, rng)
    x = torch.randn(4, hidden, generator=rng, device=device).to(dtype)
    ids, weights = routing(4, 2, experts, device, rng)
    out = kernel.fp8_experts(x, ids, weights.to(dtype), w1, s1, w2, s2)
    ref = pipeline_reference(kernel, *(t.cpu() for t in (x, ids, weights, w1, s1, w2, s2)), fp8_dtype)
    assert out.dtype == dtype
    assert relative_error(out.cpu(), ref) < 1e-2


@pytest.mark.kernels_ci
def test_fp8_experts_edge_routings(kernel, device, fp8_dtype, rng):
    experts, hidden, inner = 4, 128, 128
    w1, s1 = random_experts(kernel, experts, 2 * inner, hidden, device, fp8_dtype, rng)
    w2, s2 = random_experts(kernel, experts, hidden, inner, device, fp8_dtype, rng)
    empty = torch.empty(0, hidden, device=device, dtype=torch.bfloat16)
    no_ids = torch.empty(0, 2, dtype=torch.long, device=device)
    assert kernel.fp8_experts(empty, no_ids, no_ids.float(), w1, s1, w2, s2).shape == (0, hidden)
    x = torch.randn(6, hidden, generator=rng, device=device).to(torch.bfloat16)
    nobody = torch.full((6, 2), experts, dtype=torch.long, device=device)
    out = kernel.fp8_experts(x, nobody, torch.ones(6, 2, device=device), w1, s1, w2, s2)
    assert (out == 0).all(), "tokens routed to no expert get zeros"
    one = torch.zeros(6, 2, dtype=torch.long, device=device)  # every slot on expert 0
    weights = torch.full((6, 2), 0.5, device=device)
    out = kernel.fp8_experts(x, one, weights, w1, s1, w2, s2)
    ref = pipeline_reference(kernel, *(t.cpu() for t in (x, one, weights, w1, s1, w2, s2)), fp8_dtype)
    assert relative_error(out.cpu(), ref) < 1e-2


@pytest.mark.kernels_ci
def test_fp8_experts_bad_inputs_name_the_argument(kernel, device, fp8_dtype, rng):
    experts, hidden, inner = 2, 128, 128
    w1, s1 = random_experts(kernel, experts, 2 * inner, hidden, device, fp8_dtype, rng)
    w2, s2 = random_experts(kernel, experts, hidden, inner, device, fp8_dtype, rng)
    x = torch.randn(3, hidden, device=device).to(torch.bfloat16)
    ids, weights = routing(3, 2, experts, device, rng)
    cases = [
        ((x.to(torch.int32), ids, weights, w1, s1, w2, s2), "hidden_states must be bfloat16"),
        ((x, ids.float(), weights, w1, s1, w2, s2), "top_k_index must be int64 or int32"),
        ((x, ids, weights[:, :1], w1, s1, w2, s2), "top_k_weights must have top_k_index's shape"),
        ((x, ids, weights, w1.float(), s1, w2, s2), "gate_up_proj must be float8"),
        ((x, ids, weights, w1, s1[:, :1], w2, s2), "gate_up_proj_scale_inv must be float32"),
        ((x, ids, weights, w1, s1, w2[:, :, :64], s2), "down_proj must be"),
        ((x[:, :64], ids, weights, w1, s1, w2, s2), "gate_up_proj must be"),
    ]
    for args, message in cases:
        with pytest.raises(RuntimeError, match=message):
            kernel.fp8_experts(*args)
    if device.type == "cpu":
        with pytest.raises(RuntimeError, match="expert ids"):
            kernel.fp8_experts(x, ids + 5, weights, w1, s1, w2, s2)


# ---- transformers' FP8Experts through FP8ExpertsInterface ----


@pytest.mark.kernels_ci
def test_transformers_fp8_experts_runs_our_forward_when_registered(kernel, device, fp8_dtype, rng):
    transformers = pytest.importorskip("transformers", minversion="5.0")
    from transformers.integrations.finegrained_fp8 import ALL_FP8_EXPERTS_FUNCTIONS, FP8Experts, FP8ExpertsInterface
    from transformers.integrations.moe import use_experts_implementation

    config = transformers.DeepseekV3Config(
        hidden_size=256, moe_intermediate_size=128, n_routed_experts=6, num_experts_per_tok=2, hidden_act="silu"
    )
    experts_class = use_experts_implementation(FP8Experts, experts_interface=ALL_FP8_EXPERTS_FUNCTIONS)
    module = experts_class(config, block_size=(128, 128)).to(device)
    w1, s1 = random_experts(kernel, 6, 256, 256, device, fp8_dtype, rng)
    w2, s2 = random_experts(kernel, 6, 256, 128, device, fp8_dtype, rng)
    with torch.no_grad():
        for name, value in [
            ("gate_up_proj", w1),
            ("gate_up_proj_scale_inv", s1),
            ("down_proj", w2),
            ("down_proj_scale_inv", s2),
        ]:
            getattr(module, name).data = value
    FP8ExpertsInterface.register("kernels-community/gemm", kernel.fp8_experts_forward)
    config._experts_implementation = "kernels-community/gemm"
    x = torch.randn(7, 256, generator=rng, device=device).to(torch.bfloat16)
    ids, weights = routing(7, 2, 6, device, rng)
    out = module(x, ids, weights)
    ref = pipeline_reference(kernel, *(t.cpu() for t in (x, ids, weights, w1, s1, w2, s2)), fp8_dtype)
    assert relative_error(out.cpu(), ref) < 1e-2

    module.act_fn = torch.nn.GELU()
    with pytest.raises(ValueError, match="act_fn is GELU"):
        module(x, ids, weights)


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.kernels_ci
@pytest.mark.parametrize("tokens,experts", [(24, 16), (64, 8), (128, 8)])  # 6, 32 and 64 rows per expert
def test_fp8_experts_graph_replays_new_routings(kernel, device, fp8_dtype, rng, tokens, experts):
    """Captured once, replayed after the routing tensors are overwritten: the same results as eager
    calls on each routing (the grouped GEMMs read the routing on the device)."""
    if not hopper_dispatch(kernel, device):
        pytest.skip("inside a CUDA graph capture only the Hopper path's grouped kernels run")
    hidden, inner, top_k = 512, 256, 4
    w1, s1 = random_experts(kernel, experts, 2 * inner, hidden, device, fp8_dtype, rng)
    w2, s2 = random_experts(kernel, experts, hidden, inner, device, fp8_dtype, rng)
    x = torch.randn(tokens, hidden, generator=rng, device=device).to(torch.bfloat16)
    ids, weights = routing(tokens, top_k, experts, device, rng)
    static_ids, static_weights = ids.clone(), weights.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        kernel.fp8_experts(x, static_ids, static_weights, w1, s1, w2, s2)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = kernel.fp8_experts(x, static_ids, static_weights, w1, s1, w2, s2)
    # the capture took the path an eager call takes: the tiles
    names = gpu_kernels_run(lambda: kernel.fp8_experts(x, static_ids, static_weights, w1, s1, w2, s2))
    assert any(TILES_KERNEL in name for name in names), names
    for skew in (False, True, False):
        new_ids, new_weights = routing(tokens, top_k, experts, device, rng, skew=skew)
        static_ids.copy_(new_ids)
        static_weights.copy_(new_weights)
        graph.replay()
        expected = kernel.fp8_experts(x, new_ids, new_weights, w1, s1, w2, s2)
        torch.testing.assert_close(out, expected, rtol=0, atol=0)


@needs_cuda
@pytest.mark.kernels_ci
def test_fp8_experts_reads_weights_written_just_before(kernel, device, fp8_dtype, rng):
    """On Hopper the grouped GEMMs behind the quantizations load weights before they wait for them:
    weights copied in just before the call (no synchronize) must still be the ones multiplied."""
    hidden, inner, experts, top_k = 512, 256, 8, 4
    w1, s1 = random_experts(kernel, experts, 2 * inner, hidden, device, fp8_dtype, rng)
    w2, s2 = random_experts(kernel, experts, hidden, inner, device, fp8_dtype, rng)
    written1, written2 = torch.empty_like(w1), torch.empty_like(w2)
    for tokens in (1, 128):  # 64-row tiles; the three launches of 192-, 128- and 64-row tiles
        x = torch.randn(tokens, hidden, generator=rng, device=device).to(torch.bfloat16)
        ids, weights = routing(tokens, top_k, experts, device, rng)
        expected = kernel.fp8_experts(x, ids, weights, w1, s1, w2, s2)
        torch.cuda.synchronize()
        for _ in range(5):
            for written, w in ((written1, w1), (written2, w2)):
                written.view(torch.uint8).zero_()
                written.view(torch.uint8).copy_(w.view(torch.uint8))
            assert torch.equal(kernel.fp8_experts(x, ids, weights, written1, s1, written2, s2), expected)


@needs_cuda
@pytest.mark.kernels_ci
def test_fp8_experts_bf16_intermediates_share_their_bytes(kernel, device, fp8_dtype, rng):
    """The gate/up GEMM's bf16 output and the down projection's take one buffer between them: at 256 rows
    per expert (Hopper: three launches, SiLU-and-mul a kernel of its own) the op allocates its FP8
    intermediates, one bf16 buffer of (rows, max(2 * inner, hidden)) and its output, plus scales and
    routing (under 1 MB here), not a second 8 MB bf16 buffer."""
    if not hopper_dispatch(kernel, device):
        pytest.skip("the bound counts the Hopper path's allocations; elsewhere the GEMMs may add workspaces")
    hidden, inner, experts, top_k, tokens = 2048, 1024, 8, 4, 512
    w1, s1 = random_experts(kernel, experts, 2 * inner, hidden, device, fp8_dtype, rng)
    w2, s2 = random_experts(kernel, experts, hidden, inner, device, fp8_dtype, rng)
    x = torch.randn(tokens, hidden, generator=rng, device=device).to(torch.bfloat16)
    ids, weights = routing(tokens, top_k, experts, device, rng)
    kernel.fp8_experts(x, ids, weights, w1, s1, w2, s2)  # warm-up: one-time setup stays out of the measured call
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    out = kernel.fp8_experts(x, ids, weights, w1, s1, w2, s2)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - before
    rows = tokens * top_k
    codes = rows * hidden + rows * inner  # x's and SiLU-and-mul's FP8 rows
    shared_bf16 = rows * max(2 * inner, hidden) * 2
    bound = codes + shared_bf16 + out.numel() * out.element_size() + (1 << 20)
    assert peak <= bound, (peak, bound)


@needs_cuda
@pytest.mark.kernels_ci
# About 8, 32 and 128 rows per expert: on Hopper the first two take SiLU-and-mul into the gate/up GEMM
# (one warp per row, up to 8 rows each), the third runs it as its own kernel. Skewed: 32 rows per expert
# on average and expert 0 with over 512, on several 64-row tiles of the fused GEMM.
@pytest.mark.parametrize("tokens,experts,skew", [(64, 32, False), (512, 64, False), (512, 64, True), (512, 16, False)])
def test_fp8_experts_equals_its_ops_one_by_one(kernel, device, fp8_dtype, rng, tokens, experts, skew):
    """fp8_experts bit for bit against the same steps as separate ops (routing, quantization, the
    grouped GEMMs on rows gathered in expert order, SiLU-and-mul with quantization, combine). On Hopper
    the op's GEMMs load their first stages' weights before they wait for the quantization, the separate
    ones do not; with more K blocks than pipeline stages and more tiles than SMs, every CTA goes on
    past those stages and to further tiles."""
    hidden, inner, top_k = 1536, 1024, 4
    w1, s1 = random_experts(kernel, experts, 2 * inner, hidden, device, fp8_dtype, rng)
    w2, s2 = random_experts(kernel, experts, hidden, inner, device, fp8_dtype, rng)
    x = torch.randn(tokens, hidden, generator=rng, device=device).to(torch.bfloat16)
    ids, weights = routing(tokens, top_k, experts, device, rng, skew)
    offsets, row_token, slot_row = kernel.moe_route(ids, experts)
    xq, xs = kernel.quantize_per_token_group(x, BLOCK, fp8_dtype)
    token = row_token.long()
    h = kernel.grouped_gemm_nt_contiguous(xq[token], xs[token], w1, s1, offsets)
    hq, hs = kernel.silu_and_mul_quantize(h, fp8_dtype)
    y = kernel.grouped_gemm_nt_contiguous(hq, hs, w2, s2, offsets)
    expected = kernel.moe_combine(y, slot_row, weights, torch.bfloat16)
    assert torch.equal(kernel.fp8_experts(x, ids, weights, w1, s1, w2, s2), expected)


@needs_cuda
@pytest.mark.kernels_ci
def test_fp8_experts_compiles(kernel, device, fp8_dtype, rng):
    experts, hidden, inner = 8, 256, 128
    w1, s1 = random_experts(kernel, experts, 2 * inner, hidden, device, fp8_dtype, rng)
    w2, s2 = random_experts(kernel, experts, hidden, inner, device, fp8_dtype, rng)
    x = torch.randn(10, hidden, generator=rng, device=device).to(torch.bfloat16)
    ids, weights = routing(10, 2, experts, device, rng)
    compiled = torch.compile(lambda *a: kernel.fp8_experts(*a), fullgraph=True)
    out = compiled(x, ids, weights, w1, s1, w2, s2)
    torch.testing.assert_close(out, kernel.fp8_experts(x, ids, weights, w1, s1, w2, s2), rtol=0, atol=0)


# ---- inputs the review found unguarded ----


@pytest.mark.kernels_ci
def test_grouped_contiguous_refuses_offsets_that_decrease_or_overlap(kernel, device, fp8_dtype, rng):
    """Decreasing offsets read past the gathered rows (a crash on CPU) and overlapping ones computed
    rows twice; both are refused wherever the offsets are read on the host."""
    if device.type == "cuda":
        pytest.skip("the Hopper kernel reads the offsets on the device and clamps them")
    w, w_scale = random_experts(kernel, 3, 128, 128, device, fp8_dtype, rng)
    a, a_scale = kernel.quantize_per_token_group(torch.randn(8, 128, generator=rng), BLOCK, fp8_dtype)
    row_index = torch.arange(8, dtype=torch.int32)
    for offsets in ([0, 8, 0, 4], [0, 5, 3, 8]):
        with pytest.raises(RuntimeError, match="offsets must not decrease"):
            kernel.grouped_gemm_nt_contiguous(
                a, a_scale, w, w_scale, torch.tensor(offsets, dtype=torch.int32), row_index
            )
    with pytest.raises(RuntimeError, match=r"offsets must be within 0\.\.8"):
        kernel.grouped_gemm_nt_contiguous(
            a, a_scale, w, w_scale, torch.tensor([0, 4, 6, 9], dtype=torch.int32), row_index
        )


@pytest.mark.kernels_ci
def test_grouped_out_must_not_share_memory(kernel, device, fp8_dtype, rng):
    w, w_scale = random_experts(kernel, 2, 128, 128, device, fp8_dtype, rng)
    a, a_scale = kernel.quantize_per_token_group(torch.randn(4, 128, generator=rng, device=device), BLOCK, fp8_dtype)
    offsets = torch.tensor([0, 2, 4], dtype=torch.int32, device=device)
    expanded = torch.zeros(1, 128, dtype=torch.bfloat16, device=device).expand(4, 128)
    with pytest.raises(RuntimeError, match="out must not have elements that share memory"):
        kernel.grouped_gemm_nt_contiguous(a, a_scale, w, w_scale, offsets, out=expanded)
    buffer = torch.zeros(8, 128, dtype=torch.bfloat16, device=device)
    a_in_buffer = buffer.view(torch.uint8).view(fp8_dtype).as_strided((4, 128), (256, 1), 0)
    a_in_buffer.copy_(a)
    with pytest.raises(RuntimeError, match="out must not overlap the memory of a"):
        kernel.grouped_gemm_nt_contiguous(a_in_buffer, a_scale, w, w_scale, offsets, out=buffer[2:6])


@pytest.mark.kernels_ci
def test_fp8_experts_forward_refuses_soft_capped_swiglu(kernel, device, fp8_dtype, rng):
    experts = torch.nn.Module()
    experts.gate_up_proj, experts.gate_up_proj_scale_inv = random_experts(kernel, 2, 256, 128, device, fp8_dtype, rng)
    experts.down_proj, experts.down_proj_scale_inv = random_experts(kernel, 2, 128, 128, device, fp8_dtype, rng)
    experts.block_size, experts.act_fn, experts.gate_softcap = (128, 128), torch.nn.SiLU(), 0.5
    ids, weights = routing(3, 2, 2, device, rng)
    with pytest.raises(ValueError, match="gate_softcap is set"):
        kernel.fp8_experts_forward(experts, torch.randn(3, 128, device=device), ids, weights)


@pytest.mark.kernels_ci
def test_route_checks_its_arguments_before_the_ids(kernel):
    with pytest.raises(RuntimeError, match="top_k_index must be int64 or int32"):
        kernel.moe_route(torch.tensor([[0.0, float("nan")]]), 4)
    with pytest.raises(RuntimeError, match=r"num_experts must be 1\.\.4096, got -3"):
        kernel.moe_route(torch.tensor([[0, 1]]), -3)


@pytest.mark.kernels_ci
def test_grouped_masked_with_no_capacity_is_a_no_op(kernel, device, fp8_dtype, rng):
    w, w_scale = random_experts(kernel, 3, 128, 128, device, fp8_dtype, rng)
    a = torch.empty(3, 0, 128, dtype=fp8_dtype, device=device)
    out = kernel.grouped_gemm_nt_masked(
        a, torch.empty(3, 0, 1, device=device), w, w_scale, torch.zeros(3, dtype=torch.int32, device=device)
    )
    assert out.shape == (3, 0, 128)
