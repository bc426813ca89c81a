// Torch binding of the mixture-of-experts ops: routing, the grouped FP8 GEMM (contiguous and
// masked layouts), the weighted combine, and fp8_experts, the whole experts block in one call.
// Descriptions: gemm_common/moe_args.h. Every input is checked here with a message that names it.
#include "moe_binding.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/silu.h>
#include <ATen/ops/zeros_like.h>

#include <algorithm>

#include "binding_common.h"
#include "carving.h"
#include "gemm_common/launchers.h"
#include "gemm_common/moe_args.h"
#include "torch_binding.h"

#if defined(CUDA_KERNEL)
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#elif defined(ROCM_KERNEL)
#include <c10/core/DeviceGuard.h>
#endif

namespace {

using fp8gemm::CombineArgs;
using fp8gemm::GroupedGemmArgs;
using fp8gemm::RouteArgs;

constexpr int64_t kMaxExperts = 4096;

using binding::Carving;
using binding::check_status;
using binding::float_type;
using binding::is_fp8;

void check_device(const char* op, const at::Device& device) {
#if defined(CUDA_KERNEL) || defined(ROCM_KERNEL)
  TORCH_CHECK(device.is_cpu() || device.is_cuda(), op, ": tensors must be on a GPU or the CPU, got ", device);
#else
  TORCH_CHECK(device.is_cpu(), op, ": this build runs on the CPU only; tensors are on ", device);
#endif
}

void same_device(const char* op, const at::Tensor& first, const char* name, const at::Tensor& t) {
  TORCH_CHECK(t.device() == first.device(), op, ": all tensors must be on one device; got ", first.device(),
              " and ", name, " on ", t.device());
}

#if defined(ROCM_KERNEL)
using binding::current_hip_stream;
#endif

// ---- routing ----

struct Routing {
  at::Tensor offsets, row_token, slot_row, active;  // row_token undefined where nothing reads it
};

int64_t routed_slots(const char* op, const at::Tensor& ids) {
  const int64_t slots = ids.size(0) * ids.size(1);
  TORCH_CHECK(slots < (int64_t(1) << 31), op, ": at most 2^31 - 1 (token, expert) pairs, got ", slots);
  return slots;
}

// Writes the routing of ids into r (int32: offsets and active (experts + 1), slot_row and, where defined,
// row_token (tokens * top_k)).
void run_route(const char* op, const at::Tensor& ids, int64_t experts, const Routing& r) {
  RouteArgs args;
  args.tokens = ids.size(0);
  args.top_k = int32_t(ids.size(1));
  args.experts = int32_t(experts);
  args.ids = ids.data_ptr();
  args.id_type = ids.scalar_type() == at::kLong ? fp8gemm::IndexType::I64 : fp8gemm::IndexType::I32;
  args.ids_stride_t = ids.stride(0);
  args.ids_stride_j = ids.stride(1);
  args.offsets = r.offsets.data_ptr<int32_t>();
  args.row_token = r.row_token.defined() ? r.row_token.data_ptr<int32_t>() : nullptr;
  args.slot_row = r.slot_row.data_ptr<int32_t>();
  args.active = r.active.data_ptr<int32_t>();
  if (ids.device().is_cpu()) {
    check_status(op, fp8gemm::route_cpu(args));
  } else {
#if defined(CUDA_KERNEL)
    check_status(op, fp8gemm::route_cuda(args, c10::cuda::getCurrentCUDAStream()));
#elif defined(ROCM_KERNEL)
    check_status(op, fp8gemm::route_rocm(args, current_hip_stream(ids.device())));
#endif
  }
}

Routing route(const char* op, const at::Tensor& ids, int64_t experts) {
  const int64_t slots = routed_slots(op, ids);
  const auto i32 = at::TensorOptions().dtype(at::kInt).device(ids.device());
  Routing r{at::empty({experts + 1}, i32), at::empty({slots}, i32), at::empty({slots}, i32),
            at::empty({experts + 1}, i32)};
  run_route(op, ids, experts, r);
  return r;
}

// ---- the grouped GEMM ----

// b (E, N, K) FP8 and its scales (E, ceil(N/128), ceil(K/128)); returns N.
int64_t check_expert_weights(const char* op, const char* name, const char* scale_name, const at::Tensor& b,
                             const at::Tensor& scale, int64_t experts, int64_t K) {
  TORCH_CHECK(b.defined() && b.dim() == 3, op, ": ", name, " must be 3-D (experts, N, K), got ",
              b.defined() ? b.sizes() : at::IntArrayRef{});
  TORCH_CHECK(is_fp8(b.scalar_type()), op, ": ", name, " must be float8_e4m3fn or float8_e4m3fnuz, got ",
              b.scalar_type());
  TORCH_CHECK(b.size(0) == experts && b.size(2) == K, op, ": ", name, " must be (", experts, ", N, ", K,
              "), got ", b.sizes());
  const int64_t N = b.size(1);
  const int64_t nb = fp8gemm::ceil_div(N, fp8gemm::kScaleBlock),
                kb = fp8gemm::ceil_div(K, fp8gemm::kScaleBlock);
  TORCH_CHECK(scale.defined() && scale.scalar_type() == at::kFloat && scale.dim() == 3 &&
                  scale.size(0) == experts && scale.size(1) == nb && scale.size(2) == kb,
              op, ": ", scale_name, " must be float32 (", experts, ", ", nb, ", ", kb, "), got ",
              scale.defined() ? scale.scalar_type() : at::ScalarType::Undefined, " ",
              scale.defined() ? scale.sizes() : at::IntArrayRef{});
  same_device(op, b, name, scale);
  return N;
}

GroupedGemmArgs describe_grouped(const at::Tensor& b, const at::Tensor& b_scale, at::Tensor& out,
                                 const at::Tensor& expert_rows, bool masked) {
  GroupedGemmArgs g;
  g.experts = b.size(0);
  g.N = b.size(1);
  g.K = b.size(2);
  g.masked = masked;
  g.expert_rows = expert_rows.data_ptr<int32_t>();
  g.format =
      b.scalar_type() == at::kFloat8_e4m3fnuz ? fp8gemm::Fp8Format::E4M3FNUZ : fp8gemm::Fp8Format::E4M3FN;
  g.b = static_cast<const uint8_t*>(b.data_ptr());
  g.b_stride_e = b.stride(0);
  g.b_stride_n = b.stride(1);
  g.b_stride_k = b.stride(2);
  g.b_scale = b_scale.data_ptr<float>();
  g.b_scale_stride_e = b_scale.stride(0);
  g.b_scale_stride_nb = b_scale.stride(1);
  g.b_scale_stride_kb = b_scale.stride(2);
  g.out = reinterpret_cast<uint16_t*>(out.data_ptr());
  g.out_stride_m = out.stride(-2);
  g.out_stride_n = out.stride(-1);
  return g;
}

// a, its scales and the optional gather of its rows (a's rows as g's rows when row_index is empty).
void set_a(GroupedGemmArgs& g, const at::Tensor& a, const at::Tensor& a_scale, const at::Tensor& row_index) {
  g.a = static_cast<const uint8_t*>(a.data_ptr());
  g.a_rows = a.size(0);
  g.a_stride_m = a.stride(0);
  g.a_stride_k = a.stride(1);
  g.a_scale = a_scale.data_ptr<float>();
  g.a_scale_stride_m = a_scale.stride(0);
  g.a_scale_stride_kb = a_scale.stride(1);
  g.row_index = row_index.defined() ? row_index.data_ptr<int32_t>() : nullptr;
}

#if defined(CUDA_KERNEL)
// For the layouts Hopper's grouped wgmma tiles do not take (e.g. a row_index gather): rows per expert
// from which, outside a CUDA graph capture, one dense GEMM per expert beats the streaming one-launch
// kernel, whose weight tiles are re-read per 16 rows (H200, examples/fp8_moe.py before the tiles:
// 512 tokens x top-8 over 256 experts, 16 rows each, and more).
constexpr int64_t kDenseLoopRowsPerExpert = 12;

bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  C10_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  return status != cudaStreamCaptureStatusNone;
}

bool one_launch_wanted(const GroupedGemmArgs& g, cudaStream_t stream) {
  return g.rows_per_expert() < kDenseLoopRowsPerExpert || capturing(stream);
}

// A's scales as Hopper's tiles read them (GroupedGemmArgs::a_scales_m_contiguous_16), for the layouts the
// tiles would otherwise decline (grouped_gemm_cuda_wants_scales_copied): row-major scales, or
// quantize_per_token_group's M-contiguous ones for a row count not a multiple of 4.
at::Tensor m_contiguous_scales(const at::Tensor& scale) {
  const int64_t rows = scale.size(0), kb = scale.size(1);
  at::Tensor copy = at::empty_strided({rows, kb}, {1, (rows + 3) / 4 * 4}, scale.options());
  copy.copy_(scale);
  return copy;
}
#endif

// The gate/up GEMM with SiLU-and-mul and its quantization in it, into hq and h_scale (Hopper's 64-row
// tiles, e4m3fn); false where nothing was launched: the caller then runs the GEMM and the quantization.
bool run_grouped_silu(const char* op, GroupedGemmArgs g, const at::Tensor& a, const at::Tensor& a_scale,
                      const at::Tensor& hq, const at::Tensor& h_scale) {
#if defined(CUDA_KERNEL)
  if (!a.device().is_cuda() || hq.scalar_type() != at::kFloat8_e4m3fn) return false;
  set_a(g, a, a_scale, at::Tensor());
  if (g.rows == 0 || g.N == 0) return false;
  g.silu_q = static_cast<uint8_t*>(hq.data_ptr());
  g.silu_q_stride_m = hq.stride(0);
  g.silu_scale = h_scale.data_ptr<float>();
  g.silu_scale_stride_m = h_scale.stride(0);
  g.silu_scale_stride_kb = h_scale.stride(1);
  bool launched = false;
  check_status(op, fp8gemm::grouped_gemm_cuda(g, c10::cuda::getCurrentCUDAStream(), &launched));
  return launched;
#else
  (void)op, (void)g, (void)a, (void)a_scale, (void)hq, (void)h_scale;
  return false;
#endif
}

// The Hopper path where it takes the problem (the wgmma tiles where the layout allows: one launch, or
// three from 64 rows per expert; else the streaming kernel inside a CUDA graph capture and for few rows
// per expert); otherwise one dense GEMM per expert that owns rows, after reading the offsets or counts
// on the host (a synchronization).
void run_grouped(const char* op, GroupedGemmArgs g, const at::Tensor& a, const at::Tensor& a_scale,
                 const at::Tensor& row_index, const at::Tensor& expert_rows) {
  const at::Device device = a.device();
  set_a(g, a, a_scale, row_index);
  if (g.rows == 0 || g.N == 0) return;
#if defined(CUDA_KERNEL)
  if (device.is_cuda()) {
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    bool launched = false;
    g.one_launch = one_launch_wanted(g, stream);
    at::Tensor tile_scales;  // alive until the GEMM is queued
    if (fp8gemm::grouped_gemm_cuda_wants_scales_copied(g)) {
      tile_scales = m_contiguous_scales(a_scale);
      g.a_scale = tile_scales.data_ptr<float>();
      g.a_scale_stride_m = tile_scales.stride(0);
      g.a_scale_stride_kb = tile_scales.stride(1);
    }
    check_status(op, fp8gemm::grouped_gemm_cuda(g, stream, &launched));
    if (launched) return;
    TORCH_CHECK(!capturing(stream), op,
                ": inside a CUDA graph capture only the Hopper grouped kernel runs, and it does not take "
                "this problem "
                "(it needs e4m3fn, K-contiguous rows 16-byte aligned, N and K below 2^30); run it outside "
                "the capture");
  }
#endif
  const at::Tensor host_rows = expert_rows.to(at::kCPU);
  g.expert_rows = host_rows.data_ptr<int32_t>();
  if (!g.masked) {  // the kernel clamps ranges on the device; here the offsets are read anyway: check them
    const int32_t* offsets = g.expert_rows;
    for (int64_t e = 0; e < g.experts; ++e)
      TORCH_CHECK(offsets[e] <= offsets[e + 1], op, ": offsets must not decrease, got offsets[", e,
                  "] = ", offsets[e], " > offsets[", e + 1, "] = ", offsets[e + 1]);
    TORCH_CHECK(offsets[0] >= 0 && offsets[g.experts] <= g.rows, op, ": offsets must be within 0..", g.rows,
                ", got ", offsets[0], "..", offsets[g.experts]);
  }
  at::Tensor rows_a = a, rows_scale = a_scale;
  if (row_index.defined()) {  // gather the token rows of every owned row once (out's rows from here on)
    const int64_t used = host_rows.data_ptr<int32_t>()[g.experts];
    const at::Tensor index = row_index.narrow(0, 0, used).to(at::kLong);
    TORCH_CHECK(used == 0 || (index.min().item<int64_t>() >= 0 && index.max().item<int64_t>() < a.size(0)),
                op, ": row_index must hold rows of a (0..", a.size(0) - 1, ")");
    rows_a = a.index_select(0, index);
    rows_scale = a_scale.index_select(0, index);
  }
  g.a = static_cast<const uint8_t*>(rows_a.data_ptr());
  g.a_stride_m = rows_a.stride(0);
  g.a_stride_k = rows_a.stride(1);
  g.a_scale = rows_scale.data_ptr<float>();
  g.a_scale_stride_m = rows_scale.stride(0);
  g.a_scale_stride_kb = rows_scale.stride(1);
  for (int64_t e = 0; e < g.experts; ++e) {
    int64_t first = 0;
    const int64_t count = fp8gemm::expert_row_range(g, e, &first);
    if (count > 0) binding::run_dense_gemm(op, fp8gemm::expert_gemm(g, e, first, count), device);
  }
}

// ---- combine ----

at::Tensor combine(const char* op, const at::Tensor& rows, const at::Tensor& slot_row,
                   const at::Tensor& weights, at::ScalarType out_dtype) {
  const int64_t tokens = weights.size(0), top_k = weights.size(1), hidden = rows.size(1);
  const bool bf16_out = out_dtype == at::kBFloat16;
  at::Tensor out = at::empty({tokens, hidden}, rows.options().dtype(bf16_out ? at::kBFloat16 : at::kFloat));
  CombineArgs args;
  args.tokens = tokens;
  args.hidden = hidden;
  args.top_k = int32_t(top_k);
  args.rows = reinterpret_cast<const uint16_t*>(rows.data_ptr());
  args.rows_stride = rows.stride(0);
  args.row_count = rows.size(0);
  args.slot_row = slot_row.data_ptr<int32_t>();
  args.weights = weights.data_ptr();
  args.weight_type = float_type(op, "top_k_weights", weights);
  args.weights_stride_t = weights.stride(0);
  args.weights_stride_j = weights.stride(1);
  args.out = out.data_ptr();
  args.out_type = bf16_out ? fp8gemm::InputType::BF16 : fp8gemm::InputType::F32;
  args.out_stride = hidden;
  if (tokens > 0 && hidden > 0) {
    if (rows.device().is_cpu()) {
      check_status(op, fp8gemm::combine_cpu(args));
    } else {
#if defined(CUDA_KERNEL)
      check_status(op, fp8gemm::combine_cuda(args, c10::cuda::getCurrentCUDAStream()));
#elif defined(ROCM_KERNEL)
      check_status(op, fp8gemm::combine_rocm(args, current_hip_stream(rows.device())));
#endif
    }
  }
  return bf16_out || out_dtype == at::kFloat ? out : out.to(out_dtype);
}

void check_routing_inputs(const char* op, const at::Tensor& x, const at::Tensor& ids,
                          const at::Tensor& weights) {
  TORCH_CHECK(ids.defined() && weights.defined(), op, ": top_k_index and top_k_weights are required");
  TORCH_CHECK(weights.dim() == 2 && ids.dim() == 2 && weights.sizes() == ids.sizes(), op,
              ": top_k_weights must have top_k_index's shape (tokens, top_k), got ", weights.sizes(), " and ",
              ids.sizes());
  TORCH_CHECK(ids.size(0) == x.size(0), op, ": top_k_index must have one row per token (", x.size(0),
              "), got ", ids.size(0));
  float_type(op, "top_k_weights", weights);
  same_device(op, x, "top_k_index", ids);
  same_device(op, x, "top_k_weights", weights);
}

// top_k_index's layout and type, and the number of experts; ids outside [0, E] are refused where
// that is free (CPU tensors): on a GPU they are treated as "no expert" like E itself, since checking
// would wait for the device.
void check_ids(const char* op, const at::Tensor& ids, int64_t experts, const char* experts_name) {
  TORCH_CHECK(ids.defined() && ids.dim() == 2, op, ": top_k_index must be 2-D (tokens, top_k), got ",
              ids.defined() ? ids.sizes() : at::IntArrayRef{});
  TORCH_CHECK(ids.scalar_type() == at::kLong || ids.scalar_type() == at::kInt, op,
              ": top_k_index must be int64 or int32, got ", ids.scalar_type());
  TORCH_CHECK(experts >= 1 && experts <= kMaxExperts, op, ": ", experts_name, " must be 1..", kMaxExperts,
              ", got ", experts);
  if (!ids.device().is_cpu() || ids.numel() == 0) return;
  const int64_t lo = ids.min().item<int64_t>(), hi = ids.max().item<int64_t>();
  TORCH_CHECK(lo >= 0 && hi <= experts, op, ": top_k_index must hold expert ids 0..", experts - 1, " (or ",
              experts, " for no expert), got values from ", lo, " to ", hi);
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> moe_route(const at::Tensor& top_k_index, int64_t num_experts) {
  const char* op = "moe_route";
  TORCH_CHECK(top_k_index.defined(), op, ": top_k_index is an undefined tensor");
  check_device(op, top_k_index.device());
  const c10::OptionalDeviceGuard guard(top_k_index.device());
  check_ids(op, top_k_index, num_experts, "num_experts");
  Routing r = route(op, top_k_index, num_experts);
  return {r.offsets, r.row_token, r.slot_row};
}

void grouped_gemm_nt(at::Tensor& out, const at::Tensor& a, const at::Tensor& a_scale,
                     const std::optional<at::Tensor>& row_index, const at::Tensor& b,
                     const at::Tensor& b_scale, const at::Tensor& expert_rows, bool masked) {
  const char* op = masked ? "grouped_gemm_nt_masked" : "grouped_gemm_nt_contiguous";
  TORCH_CHECK(out.defined() && a.defined() && a_scale.defined() && expert_rows.defined(), op,
              ": out, a, a_scale and the expert rows are required");
  check_device(op, a.device());
  for (const auto& [name, t] : {std::pair<const char*, const at::Tensor*>{"out", &out},
                                {"a_scale", &a_scale},
                                {"b", &b},
                                {"expert_rows", &expert_rows}})
    same_device(op, a, name, *t);
  TORCH_CHECK(is_fp8(a.scalar_type()) && a.scalar_type() == b.scalar_type(), op,
              ": a must be FP8 with b's dtype ", b.scalar_type(), ", got ", a.scalar_type());
  const int64_t experts = b.dim() == 3 ? b.size(0) : 0, K = a.size(-1);
  TORCH_CHECK(experts >= 1, op, ": b must be 3-D (experts, N, K) with at least one expert, got ", b.sizes());
  const int64_t N = check_expert_weights(op, "b", "b_scale", b, b_scale, experts, K);
  const int64_t kb = fp8gemm::ceil_div(K, fp8gemm::kScaleBlock);
  TORCH_CHECK(expert_rows.scalar_type() == at::kInt && expert_rows.dim() == 1 &&
                  expert_rows.size(0) == (masked ? experts : experts + 1),
              op, ": ", masked ? "masked_m (counts)" : "offsets", " must be int32 (",
              masked ? experts : experts + 1, "), got ", expert_rows.scalar_type(), " ", expert_rows.sizes());
  const at::Tensor rows_of = expert_rows.contiguous();
  TORCH_CHECK(out.scalar_type() == at::kBFloat16, op, ": out must be bfloat16, got ", out.scalar_type());
  TORCH_CHECK(!binding::elements_share_memory(out.flatten(0, out.dim() - 2)), op,
              ": out must not have elements that share memory (e.g. an expanded tensor)");
  const std::pair<const char*, const at::Tensor*> inputs[] = {
      {"a", &a}, {"a_scale", &a_scale}, {"b", &b}, {"b_scale", &b_scale}, {"the expert rows", &expert_rows}};
  for (const auto& [name, t] : inputs)
    TORCH_CHECK(!binding::overlaps(out, *t), op, ": out must not overlap the memory of ", name);
  if (row_index.has_value() && row_index->defined())
    TORCH_CHECK(!binding::overlaps(out, *row_index), op, ": out must not overlap the memory of row_index");
  const c10::OptionalDeviceGuard guard(a.device());
  GroupedGemmArgs g = describe_grouped(b, b_scale, out, rows_of, masked);
  at::Tensor index;
  if (masked) {
    TORCH_CHECK(a.dim() == 3 && a.size(0) == experts, op, ": a must be (", experts, ", capacity, ", K,
                "), got ", a.sizes());
    const int64_t capacity = a.size(1);
    TORCH_CHECK(a_scale.scalar_type() == at::kFloat && a_scale.dim() == 3 && a_scale.size(0) == experts &&
                    a_scale.size(1) == capacity && a_scale.size(2) == kb,
                op, ": a_scale must be float32 (", experts, ", ", capacity, ", ", kb, "), got ",
                a_scale.sizes());
    TORCH_CHECK(out.dim() == 3 && out.size(0) == experts && out.size(1) == capacity && out.size(2) == N, op,
                ": out must be (", experts, ", ", capacity, ", ", N, "), got ", out.sizes());
    TORCH_CHECK(!row_index.has_value() || !row_index->defined(), op,
                ": row_index is for the contiguous layout");
    if (capacity == 0) return;
    // (E, capacity, .) as (E * capacity, .): the experts' blocks of rows must be evenly spaced.
    TORCH_CHECK(a.stride(0) == capacity * a.stride(1) && a_scale.stride(0) == capacity * a_scale.stride(1) &&
                    out.stride(0) == capacity * out.stride(1),
                op,
                ": a, a_scale and out must hold each expert's rows as one block (e.g. contiguous tensors)");
    g.capacity = capacity;
    g.rows = experts * capacity;
    run_grouped(op, g, a.flatten(0, 1), a_scale.flatten(0, 1), index, rows_of);
    return;
  }
  TORCH_CHECK(a.dim() == 2, op, ": a must be 2-D (rows, K), got ", a.sizes());
  TORCH_CHECK(a_scale.scalar_type() == at::kFloat && a_scale.dim() == 2 && a_scale.size(0) == a.size(0) &&
                  a_scale.size(1) == kb,
              op, ": a_scale must be float32 (", a.size(0), ", ", kb, "), got ", a_scale.sizes());
  TORCH_CHECK(out.dim() == 2 && out.size(1) == N, op, ": out must be (rows, ", N, "), got ", out.sizes());
  if (row_index.has_value() && row_index->defined()) {
    TORCH_CHECK(
        row_index->scalar_type() == at::kInt && row_index->dim() == 1 && row_index->size(0) == out.size(0),
        op, ": row_index must be int32 (", out.size(0), "), got ", row_index->scalar_type(), " ",
        row_index->sizes());
    same_device(op, a, "row_index", *row_index);
    index = row_index->contiguous();
  } else {
    TORCH_CHECK(a.size(0) == out.size(0), op, ": without row_index, a and out must have as many rows; got ",
                a.size(0), " and ", out.size(0));
  }
  g.rows = out.size(0);
  run_grouped(op, g, a, a_scale, index, rows_of);
}

at::Tensor moe_combine(const at::Tensor& rows, const at::Tensor& slot_row, const at::Tensor& top_k_weights,
                       at::ScalarType out_dtype) {
  const char* op = "moe_combine";
  TORCH_CHECK(rows.defined() && slot_row.defined() && top_k_weights.defined(), op,
              ": rows, slot_row and top_k_weights are required");
  check_device(op, rows.device());
  same_device(op, rows, "slot_row", slot_row);
  same_device(op, rows, "top_k_weights", top_k_weights);
  TORCH_CHECK(rows.dim() == 2 && rows.scalar_type() == at::kBFloat16 && rows.stride(1) == 1, op,
              ": rows must be bfloat16 (rows, hidden) with contiguous rows, got ", rows.scalar_type(), " ",
              rows.sizes());
  TORCH_CHECK(top_k_weights.dim() == 2, op, ": top_k_weights must be (tokens, top_k), got ",
              top_k_weights.sizes());
  TORCH_CHECK(slot_row.scalar_type() == at::kInt && slot_row.dim() == 1 &&
                  slot_row.size(0) == top_k_weights.numel() && slot_row.is_contiguous(),
              op, ": slot_row must be contiguous int32 (", top_k_weights.numel(), "), got ",
              slot_row.sizes());
  TORCH_CHECK(out_dtype == at::kBFloat16 || out_dtype == at::kHalf || out_dtype == at::kFloat, op,
              ": out_dtype must be bfloat16, float16 or float32, got ", out_dtype);
  if (rows.device().is_cpu() && slot_row.numel() > 0) {
    const int64_t lo = slot_row.min().item<int64_t>(), hi = slot_row.max().item<int64_t>();
    TORCH_CHECK(lo >= -1 && hi < rows.size(0), op, ": slot_row must hold rows 0..", rows.size(0) - 1,
                " or -1");
  }
  const c10::OptionalDeviceGuard guard(rows.device());
  return combine(op, rows, slot_row, top_k_weights, out_dtype);
}

at::Tensor fp8_experts(const at::Tensor& x, const at::Tensor& top_k_index, const at::Tensor& top_k_weights,
                       const at::Tensor& w_in, const at::Tensor& w_in_scale, const at::Tensor& w_out,
                       const at::Tensor& w_out_scale, bool gated) {
  const char* op = "fp8_experts";
  TORCH_CHECK(x.defined() && x.dim() == 2, op, ": hidden_states must be 2-D (tokens, hidden), got ",
              x.defined() ? x.sizes() : at::IntArrayRef{});
  float_type(op, "hidden_states", x);
  check_device(op, x.device());
  check_routing_inputs(op, x, top_k_index, top_k_weights);
  const int64_t hidden = x.size(1), experts = w_in.dim() == 3 ? w_in.size(0) : 0;
  TORCH_CHECK(experts >= 1, op, ": ", gated ? "gate_up_proj" : "up_proj",
              " must be 3-D (experts, N, hidden), got ", w_in.sizes());
  const int64_t n_in = check_expert_weights(op, gated ? "gate_up_proj" : "up_proj",
                                            gated ? "gate_up_proj_scale_inv" : "up_proj_scale_inv", w_in,
                                            w_in_scale, experts, hidden);
  TORCH_CHECK(!gated || n_in % 2 == 0, op,
              ": gate_up_proj must have an even number of rows (gate | up), got ", n_in);
  const int64_t inner = gated ? n_in / 2 : n_in;
  const int64_t n_out =
      check_expert_weights(op, "down_proj", "down_proj_scale_inv", w_out, w_out_scale, experts, inner);
  TORCH_CHECK(n_out == hidden, op, ": down_proj must be (", experts, ", ", hidden, ", ", inner, "), got ",
              w_out.sizes());
  same_device(op, x, "gate_up_proj", w_in);
  same_device(op, x, "down_proj", w_out);
  TORCH_CHECK(w_out.scalar_type() == w_in.scalar_type(), op,
              ": down_proj must have the dtype of the first projection");
  const c10::OptionalDeviceGuard guard(x.device());
  check_ids(op, top_k_index, experts, "the number of experts (gate_up_proj.size(0))");
  const int64_t tokens = x.size(0);
  if (tokens == 0 || top_k_index.size(1) == 0) return at::zeros_like(x);

  // One row per (token, expert) slot; the intermediates in one allocation. The first GEMM's bf16 output
  // and the second's share their bytes: the first is consumed by its quantization, queued before the second
  // GEMM, which writes only after it waits for that quantization (or is never written, where the first GEMM
  // takes SiLU-and-mul in).
  const int64_t rows = routed_slots(op, top_k_index);
  const int64_t scale_pitch = (rows + 3) / 4 * 4;  // the scales' K blocks 16-byte aligned (TMA reads them)
  const at::ScalarType fp8 = w_in.scalar_type();
  const int64_t kb_in = fp8gemm::ceil_div(hidden, fp8gemm::kScaleBlock),
                kb_out = fp8gemm::ceil_div(inner, fp8gemm::kScaleBlock);
  Carving carving;
  const int64_t at_offsets = carving.reserve(experts + 1, at::kInt),
                at_active = carving.reserve(experts + 1, at::kInt),
                at_slot_row = carving.reserve(rows, at::kInt), at_xq = carving.reserve(rows * hidden, fp8),
                at_x_scale = carving.reserve(scale_pitch * kb_in, at::kFloat),
                at_hq = carving.reserve(rows * inner, fp8),
                at_h_scale = carving.reserve(scale_pitch * kb_out, at::kFloat),
                at_h_or_y = carving.reserve(rows * std::max(n_in, hidden), at::kBFloat16);
  carving.allocate(x.device());
  const Routing r{carving.piece(at_offsets, at::kInt, {experts + 1}, {1}), at::Tensor(),  // no row_token
                  carving.piece(at_slot_row, at::kInt, {rows}, {1}),
                  carving.piece(at_active, at::kInt, {experts + 1}, {1})};
  run_route(op, top_k_index, experts, r);
  at::Tensor h = carving.piece(at_h_or_y, at::kBFloat16, {rows, n_in}, {n_in, 1});
  GroupedGemmArgs g1 = describe_grouped(w_in, w_in_scale, h, r.offsets, false);
  g1.rows = rows;
  g1.active = r.active.data_ptr<int32_t>();
  // The quantization writes each token's rows in expert order (Hopper's tiles read A as it lies): each
  // token read once, its codes stored top_k times. Quantized rows as the GEMMs read them: K contiguous,
  // the scales M-contiguous with 16-byte aligned K blocks.
  const at::Tensor xq = carving.piece(at_xq, fp8, {rows, hidden}, {hidden, 1}),
                   x_scale = carving.piece(at_x_scale, at::kFloat, {rows, kb_in}, {1, scale_pitch});
  quantize_rows_into(x, fp8, false, r.slot_row.view({tokens, top_k_index.size(1)}), xq, x_scale);
  g1.after_quantize = hidden > 0;  // quantize_rows_into queued its kernel last
  const at::Tensor hq = carving.piece(at_hq, fp8, {rows, inner}, {inner, 1}),
                   h_scale = carving.piece(at_h_scale, at::kFloat, {rows, kb_out}, {1, scale_pitch});
  if (!gated || !run_grouped_silu(op, g1, xq, x_scale, hq, h_scale)) {
    run_grouped(op, g1, xq, x_scale, at::Tensor(), r.offsets);
    quantize_rows_into(gated ? h : at::silu(h), fp8, gated, at::Tensor(), hq, h_scale);
  }
  at::Tensor y = carving.piece(at_h_or_y, at::kBFloat16, {rows, hidden}, {hidden, 1});
  GroupedGemmArgs g2 = describe_grouped(w_out, w_out_scale, y, r.offsets, false);
  g2.rows = rows;
  g2.active = r.active.data_ptr<int32_t>();
  // Behind the quantization, or behind the gate/up GEMM that took SiLU-and-mul in (which starts behind the
  // first quantization): no kernel that may still run writes down_proj or the routing.
  g2.after_quantize = inner > 0;
  run_grouped(op, g2, hq, h_scale, at::Tensor(), r.offsets);
  return combine(op, y, r.slot_row, top_k_weights, x.scalar_type());
}
