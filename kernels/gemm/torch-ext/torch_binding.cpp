// Torch binding of the FP8 block-scaled GEMM, the activation quantization and the linear layer
// built from them: checks every input, describes the call as a fp8gemm::GemmArgs or
// QuantizeArgs (strides passed through, nothing copied) and runs the backend's launcher on the
// current stream.
#include "torch_binding.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/sigmoid.h>
#include <c10/util/accumulate.h>
#include <torch/library.h>

#include <algorithm>
#include <numeric>

#include "binding_common.h"
#include "carving.h"
#include "gemm_common/fp8_quantize.h"
#include "gemm_common/gemm_args.h"
#include "gemm_common/launchers.h"
#include "moe_binding.h"
#include "registration.h"

#if defined(CUDA_KERNEL)
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#elif defined(ROCM_KERNEL)
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#endif

namespace binding {

bool is_fp8(at::ScalarType t) { return t == at::kFloat8_e4m3fn || t == at::kFloat8_e4m3fnuz; }

void check_status(const char* op, fp8gemm::Status status) {
  TORCH_CHECK(status == fp8gemm::kOk, op, ": ", status);
}

fp8gemm::InputType float_type(const char* op, const char* name, const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kBFloat16:
      return fp8gemm::InputType::BF16;
    case at::kHalf:
      return fp8gemm::InputType::F16;
    case at::kFloat:
      return fp8gemm::InputType::F32;
    default:
      TORCH_CHECK(false, op, ": ", name, " must be bfloat16, float16 or float32, got ", t.scalar_type());
  }
}

#if defined(ROCM_KERNEL)
hipStream_t current_hip_stream(const at::Device& device) {
  const c10::impl::VirtualGuardImpl device_impl(device.type());
  return static_cast<hipStream_t>(device_impl.getStream(device).native_handle());
}
#endif

// [first byte, one past the last byte] that a tensor's elements can touch.
std::pair<uintptr_t, uintptr_t> byte_span(const at::Tensor& t) {
  const auto start = reinterpret_cast<uintptr_t>(t.data_ptr());
  int64_t last = 0;
  for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
  return {start, start + uintptr_t((last + 1) * t.element_size())};
}

// Whether two elements of a 2-D tensor share memory. at::has_internal_overlap answers the easy
// cases (a zero stride: yes; a dense layout: no) and "too hard" for the rest, such as
// as_strided((8, 130), (1, 1)); those are decided here. Element (i, j) lies at offset
// i * s0 + j * s1 (strides >= 0), so two distinct elements meet when d0 * s0 == d1 * s1 for some
// 0 < |d0| < n0, |d1| < n1. With both strides positive the smallest solution is
// d0 = s1 / g, d1 = s0 / g (g = gcd(s0, s1)), so they meet exactly when that fits the sizes.
bool elements_share_memory(const at::Tensor& t) {
  const at::MemOverlap answer = at::has_internal_overlap(t);
  if (answer != at::MemOverlap::TooHard) return answer == at::MemOverlap::Yes;
  const int64_t n0 = t.size(0), n1 = t.size(1), s0 = t.stride(0), s1 = t.stride(1);
  if (n0 <= 1 || n1 <= 1) return (n0 > 1 && s0 == 0) || (n1 > 1 && s1 == 0);
  if (s0 == 0 || s1 == 0) return true;
  const int64_t g = std::gcd(s0, s1);
  return s1 / g < n0 && s0 / g < n1;
}

// Whether the byte ranges of two tensors meet (a superset of sharing an element: two tensors
// interleaved in one buffer without a common element are also refused).
bool overlaps(const at::Tensor& x, const at::Tensor& y) {
  if (x.numel() == 0 || y.numel() == 0) return false;
  const auto [x0, x1] = byte_span(x);
  const auto [y0, y1] = byte_span(y);
  return x0 < y1 && y0 < x1;
}

}  // namespace binding

namespace {

using binding::check_status;
using binding::elements_share_memory;
using binding::is_fp8;
using binding::overlaps;
using fp8gemm::GemmArgs;
#if defined(ROCM_KERNEL)
using binding::current_hip_stream;
#endif

// The two operand layouts the ops take: gemm's (b (K, N), scales K-block first) and gemm_nt's
// (b (N, K), scales K-block last, as DeepGEMM, vLLM and torch._scaled_mm take them). Both describe
// the same GemmArgs; gemm_nt's only swaps strides, so no transposed views are made per call.
struct Layout {
  const char* op;
  bool nt;
};
constexpr Layout kGemm{"gemm", false}, kGemmNt{"gemm_nt", true};

void check_inputs(const Layout& l, const at::Tensor& out, const at::Tensor& a, const at::Tensor& b,
                  const at::Tensor& a_scale, const at::Tensor& b_scale) {
  const char* op = l.op;
  const std::pair<const char*, const at::Tensor*> all[] = {
      {"out", &out}, {"a", &a}, {"b", &b}, {"a_scale", &a_scale}, {"b_scale", &b_scale}};
  for (const auto& [name, t] : all) {
    TORCH_CHECK(t->defined(), op, ": ", name, " is an undefined tensor");
    TORCH_CHECK(t->device() == a.device(), op, ": all tensors must be on one device; a is on ", a.device(),
                " but ", name, " is on ", t->device());
  }
  TORCH_CHECK(a.dim() == 2, op, ": a must be 2-D (M, K), got ", a.dim(), "-D");
  TORCH_CHECK(b.dim() == 2, op, ": b must be 2-D ", l.nt ? "(N, K)" : "(K, N)", ", got ", b.dim(), "-D");
  TORCH_CHECK(is_fp8(a.scalar_type()), op, ": a must be float8_e4m3fn or float8_e4m3fnuz, got ",
              a.scalar_type());
  TORCH_CHECK(b.scalar_type() == a.scalar_type(), op, ": b must have a's dtype ", a.scalar_type(), ", got ",
              b.scalar_type());
  const int64_t M = a.size(0), K = a.size(1), N = b.size(l.nt ? 0 : 1);
  if (l.nt) {
    TORCH_CHECK(b.size(1) == K, op, ": b must be (N, K) = (N, ", K, ") to match a (", M, ", ", K, "), got ",
                b.sizes());
  } else {
    TORCH_CHECK(b.size(0) == K, op, ": b must be (K, N) = (", K, ", N) to match a (", M, ", ", K, "), got ",
                b.sizes());
  }
  const int64_t k_blocks = fp8gemm::ceil_div(K, fp8gemm::kScaleBlock);
  const int64_t n_blocks = fp8gemm::ceil_div(N, fp8gemm::kScaleBlock);
  TORCH_CHECK(a_scale.scalar_type() == at::kFloat, op, ": a_scale must be float32, got ",
              a_scale.scalar_type());
  if (l.nt) {
    TORCH_CHECK(a_scale.dim() == 2 && a_scale.size(0) == M && a_scale.size(1) == k_blocks, op,
                ": a_scale must be (M, ceil(K/128)) = (", M, ", ", k_blocks, "), got ", a_scale.sizes());
  } else {
    TORCH_CHECK(a_scale.dim() == 2 && a_scale.size(0) == k_blocks && a_scale.size(1) == M, op,
                ": a_scale must be (ceil(K/128), M) = (", k_blocks, ", ", M, "), got ", a_scale.sizes());
  }
  TORCH_CHECK(b_scale.scalar_type() == at::kFloat, op, ": b_scale must be float32, got ",
              b_scale.scalar_type());
  if (l.nt) {
    TORCH_CHECK(b_scale.dim() == 2 && b_scale.size(0) == n_blocks && b_scale.size(1) == k_blocks, op,
                ": b_scale must be (ceil(N/128), ceil(K/128)) = (", n_blocks, ", ", k_blocks, "), got ",
                b_scale.sizes());
  } else {
    TORCH_CHECK(b_scale.dim() == 2 && b_scale.size(0) == k_blocks && b_scale.size(1) == n_blocks, op,
                ": b_scale must be (ceil(K/128), ceil(N/128)) = (", k_blocks, ", ", n_blocks, "), got ",
                b_scale.sizes());
  }
  TORCH_CHECK(out.scalar_type() == at::kBFloat16, op, ": out must be bfloat16, got ", out.scalar_type());
  TORCH_CHECK(out.dim() == 2 && out.size(0) == M && out.size(1) == N, op, ": out must be (M, N) = (", M, ", ",
              N, "), got ", out.sizes());
  TORCH_CHECK(
      !elements_share_memory(out), op,
      ": out must not have elements that share memory (e.g. an expanded tensor or overlapping strides)");
  for (const auto& [name, t] : all)
    TORCH_CHECK(t == &out || !overlaps(out, *t), op, ": out must not overlap the memory of ", name);
}

// The format of an FP8 tensor (checked to be one by the caller).
fp8gemm::Fp8Format format_of(at::ScalarType dtype) {
  return dtype == at::kFloat8_e4m3fnuz ? fp8gemm::Fp8Format::E4M3FNUZ : fp8gemm::Fp8Format::E4M3FN;
}

// B, its scales and out of a GEMM with M rows and K columns of A (whose fields the caller sets).
GemmArgs describe_b_and_out(const Layout& l, int64_t M, int64_t K, at::Tensor& out, const at::Tensor& b,
                            const at::Tensor& b_scale) {
  // The dimension of the given tensor that holds dimension d of gemm's layout.
  auto nt_dim = [&](int d) { return l.nt ? 1 - d : d; };
  GemmArgs args;
  args.M = M;
  args.K = K;
  args.N = b.size(nt_dim(1));
  args.format = format_of(b.scalar_type());
  args.b = static_cast<const uint8_t*>(b.data_ptr());
  args.b_stride_k = b.stride(nt_dim(0));
  args.b_stride_n = b.stride(nt_dim(1));
  args.b_scale = b_scale.data_ptr<float>();
  args.b_scale_stride_kb = b_scale.stride(nt_dim(0));
  args.b_scale_stride_nb = b_scale.stride(nt_dim(1));
  args.out = reinterpret_cast<uint16_t*>(out.data_ptr());
  args.out_stride_m = out.stride(0);
  args.out_stride_n = out.stride(1);
  return args;
}

GemmArgs describe(const Layout& l, at::Tensor& out, const at::Tensor& a, const at::Tensor& b,
                  const at::Tensor& a_scale, const at::Tensor& b_scale) {
  GemmArgs args = describe_b_and_out(l, a.size(0), a.size(1), out, b, b_scale);
  const int scale_kb_dim = l.nt ? 1 : 0;
  args.a = static_cast<const uint8_t*>(a.data_ptr());
  args.a_stride_m = a.stride(0);
  args.a_stride_k = a.stride(1);
  args.a_scale = a_scale.data_ptr<float>();
  args.a_scale_stride_kb = a_scale.stride(scale_kb_dim);
  args.a_scale_stride_m = a_scale.stride(1 - scale_kb_dim);
  return args;
}

// Device memory the launcher asks for, from torch's caching allocator; none (an undefined
// tensor, nullptr) when it asks for 0 bytes, as it does on most calls: an empty allocation
// costs a microsecond or two of host time per call.
at::Tensor workspace_tensor(size_t bytes, const at::Device& device) {
  if (bytes == 0) return {};
  return at::empty({int64_t(bytes)}, at::dtype(at::kByte).device(device));
}

void* data_or_null(const at::Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }
size_t size_or_zero(const at::Tensor& t) { return t.defined() ? size_t(t.numel()) : 0; }

#if defined(CUDA_KERNEL)
int device_sm(const at::Device& device) {
  int major = 0, minor = 0;
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device.index()));
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device.index()));
  return 10 * major + minor;
}
#endif

// A device guard for the tensors' device (a no-op for the CPU), after checking that this build
// runs on it.
struct OnDevice {
  explicit OnDevice(const char* op, const at::Device& device) : guard(check(op, device)) {}

  static at::Device check(const char* op, const at::Device& device) {
#if defined(CUDA_KERNEL)
    TORCH_CHECK(device.is_cpu() || device.is_cuda(), op,
                ": tensors must be on a CUDA device or the CPU, got ", device);
#elif defined(ROCM_KERNEL)
    // ROCm builds of torch present HIP devices as "cuda".
    TORCH_CHECK(device.is_cpu() || device.is_cuda(), op,
                ": tensors must be on a ROCm (cuda) device or the CPU, got ", device);
#else
    TORCH_CHECK(device.is_cpu(), op, ": this build runs on the CPU only; tensors are on ", device);
#endif
    return device;
  }

  c10::OptionalDeviceGuard guard;
};

// Runs a described GEMM (inputs checked) on `device`, under its guard.
void run_gemm(const char* op, const GemmArgs& args, const at::Device& device) {
  if (args.M == 0 || args.N == 0) return;
  if (device.is_cpu()) {
    check_status(op, fp8gemm::gemm_cpu(args));
    return;
  }
#if defined(CUDA_KERNEL)
  const at::Tensor workspace =
      workspace_tensor(fp8gemm::gemm_cuda_workspace_bytes(args, device_sm(device)), device);
  check_status(op, fp8gemm::gemm_cuda(args, data_or_null(workspace), size_or_zero(workspace),
                                      c10::cuda::getCurrentCUDAStream()));
#elif defined(ROCM_KERNEL)
  const at::Tensor workspace = workspace_tensor(fp8gemm::gemm_rocm_workspace_bytes(args), device);
  check_status(op, fp8gemm::gemm_rocm(args, data_or_null(workspace), size_or_zero(workspace),
                                      current_hip_stream(device)));
#endif
}

}  // namespace

void binding::run_dense_gemm(const char* op, const fp8gemm::GemmArgs& args, const at::Device& device) {
  run_gemm(op, args, device);
}

namespace {

void run(const Layout& l, at::Tensor& out, const at::Tensor& a, const at::Tensor& b,
         const at::Tensor& a_scale, const at::Tensor& b_scale) {
  check_inputs(l, out, a, b, a_scale, b_scale);
  const OnDevice on(l.op, a.device());
  run_gemm(l.op, describe(l, out, a, b, a_scale, b_scale), a.device());
}

// ---- activation quantization, SiLU-and-mul and the linear layer ----

fp8gemm::InputType input_type(const char* op, const at::Tensor& x) { return binding::float_type(op, "x", x); }

fp8gemm::Fp8Format fp8_format(const char* op, at::ScalarType dtype) {
  TORCH_CHECK(is_fp8(dtype), op, ": dtype must be float8_e4m3fn or float8_e4m3fnuz, got ", dtype);
  return format_of(dtype);
}

// Where quantized activations of M rows and K columns go: q (M, K) with rows q_stride_m bytes
// apart, scale[m * scale_stride_m + kb * scale_stride_kb].
struct QuantizedRows {
  int64_t M = 0, K = 0;
  uint8_t* q = nullptr;
  int64_t q_stride_m = 0;
  float* scale = nullptr;
  int64_t scale_stride_m = 0, scale_stride_kb = 0;
};

// q (M, K) row-major and its scales (M, ceil(K/128)) M-major (strides (1, M)), the layout
// gemm_nt's fast paths read, as tensors (what quantize returns).
std::tuple<at::Tensor, at::Tensor> empty_quantized(int64_t M, int64_t K, at::ScalarType dtype,
                                                   const at::Device& device) {
  const auto options = at::TensorOptions().device(device);
  return {at::empty({M, K}, options.dtype(dtype)),
          at::empty({fp8gemm::ceil_div(K, fp8gemm::kScaleBlock), M}, options.dtype(at::kFloat)).t()};
}

// The same layout in one allocation, for fp8_linear, which hands the two to the GEMM only: one
// allocation less per call (host time). The returned tensor owns the memory `rows` points into.
at::Tensor empty_quantized_rows(int64_t M, int64_t K, const at::Device& device, QuantizedRows* rows) {
  binding::Carving carving;
  const int64_t at_q = carving.reserve(M * K, at::kByte),
                at_scale = carving.reserve(fp8gemm::ceil_div(K, fp8gemm::kScaleBlock) * M, at::kFloat);
  const at::Tensor memory = carving.allocate(device);
  rows->M = M;
  rows->K = K;
  rows->q = carving.pointer<uint8_t>(at_q);
  rows->q_stride_m = K;
  rows->scale = carving.pointer<float>(at_scale);
  rows->scale_stride_m = 1;
  rows->scale_stride_kb = M;
  return memory;
}

// Where q (M, K) with contiguous rows and its scales (M, kb) are, as QuantizedRows.
QuantizedRows quantized_rows(const at::Tensor& q, const at::Tensor& scale) {
  QuantizedRows to;
  to.M = q.size(0);
  to.K = q.size(1);
  to.q = static_cast<uint8_t*>(q.data_ptr());
  to.q_stride_m = q.stride(0);
  to.scale = scale.data_ptr<float>();
  to.scale_stride_m = scale.stride(0);
  to.scale_stride_kb = scale.stride(1);
  return to;
}

// Quantizes x (M, K), or silu(x[:, :K]) * x[:, K:] for x (M, 2K), into `to`; with q_row (int32 (M, copies)),
// x's row m goes to to's rows q_row[m, :] (QuantizeArgs::q_row).
void run_quantize(const char* op, const at::Tensor& x, bool silu_and_mul, fp8gemm::Fp8Format format,
                  const QuantizedRows& to, const at::Tensor& q_row = at::Tensor()) {
  fp8gemm::QuantizeArgs args;
  if (q_row.defined()) {
    args.q_row = q_row.data_ptr<int32_t>();
    args.copies = int32_t(q_row.size(1));
    args.q_rows = to.M;
  }
  args.M = x.size(0);
  args.K = to.K;
  args.input = input_type(op, x);
  args.x = x.data_ptr();
  args.x_stride_m = x.stride(0);
  args.x_stride_k = x.stride(1);
  args.silu_and_mul = silu_and_mul;
  args.format = format;
  args.q = to.q;
  args.q_stride_m = to.q_stride_m;
  args.scale = to.scale;
  args.scale_stride_m = to.scale_stride_m;
  args.scale_stride_kb = to.scale_stride_kb;
  if (args.M == 0 || args.K == 0) return;
  if (x.device().is_cpu()) {
    check_status(op, fp8gemm::quantize_cpu(args));
    return;
  }
#if defined(CUDA_KERNEL)
  check_status(op, fp8gemm::quantize_cuda(args, c10::cuda::getCurrentCUDAStream()));
#elif defined(ROCM_KERNEL)
  check_status(op, fp8gemm::quantize_rocm(args, current_hip_stream(x.device())));
#endif
}

// Columns of what x (M, C) quantizes to: C, or C / 2 with silu_and_mul.
int64_t quantized_columns(const char* op, const at::Tensor& x, bool silu_and_mul) {
  TORCH_CHECK(x.dim() == 2, op, ": x must be 2-D (M, ", silu_and_mul ? "2K" : "K", "), got ", x.dim(), "-D");
  if (!silu_and_mul) return x.size(1);
  TORCH_CHECK(x.size(1) % 2 == 0, op, ": x must have an even number of columns (gate | up), got ", x.size(1));
  return x.size(1) / 2;
}

const char* quantize_op_name(bool silu_and_mul) {
  return silu_and_mul ? "silu_and_mul_quantize" : "quantize";
}

// Rows of x (..., cols) as one dimension; -1 cannot be used where cols is 0.
int64_t leading_rows(const at::Tensor& x) {
  return c10::multiply_integers(x.sizes().begin(), x.sizes().end() - 1);
}

struct LinearShape {
  int64_t K, N;
};

// x's last dimension is in_features, or twice that (gate | up) with silu_and_mul.
LinearShape check_linear(const char* op, const at::Tensor& x, bool silu_and_mul, const at::Tensor& weight,
                         const at::Tensor& scale, const std::optional<at::Tensor>& bias) {
  TORCH_CHECK(x.defined() && weight.defined() && scale.defined(), op,
              ": x, weight and weight_scale_inv are required");
  input_type(op, x);
  TORCH_CHECK(x.dim() >= 1, op, ": x must be (..., in_features), got a 0-D tensor");
  TORCH_CHECK(weight.dim() == 2, op, ": weight must be 2-D (out_features, in_features), got ", weight.dim(),
              "-D");
  TORCH_CHECK(is_fp8(weight.scalar_type()), op, ": weight must be float8_e4m3fn or float8_e4m3fnuz, got ",
              weight.scalar_type());
  const int64_t N = weight.size(0), K = weight.size(1), x_columns = silu_and_mul ? 2 * K : K;
  TORCH_CHECK(x.size(-1) == x_columns, op, ": x must be (..., ", x_columns, ") to match weight (", N, ", ", K,
              ")", silu_and_mul ? " (gate and up side by side)" : "", ", got ", x.sizes());
  const int64_t n_blocks = fp8gemm::ceil_div(N, fp8gemm::kScaleBlock),
                k_blocks = fp8gemm::ceil_div(K, fp8gemm::kScaleBlock);
  TORCH_CHECK(scale.scalar_type() == at::kFloat && scale.dim() == 2 && scale.size(0) == n_blocks &&
                  scale.size(1) == k_blocks,
              op, ": weight_scale_inv must be float32 (ceil(out/128), ceil(in/128)) = (", n_blocks, ", ",
              k_blocks, "), got ", scale.scalar_type(), " ", scale.sizes());
  std::vector<const at::Tensor*> all{&weight, &scale};
  if (bias.has_value() && bias->defined()) {
    TORCH_CHECK(bias->dim() == 1 && bias->size(0) == N, op, ": bias must be (", N, "), got ", bias->sizes());
    TORCH_CHECK(at::isFloatingType(bias->scalar_type()), op, ": bias must be floating point, got ",
                bias->scalar_type());
    all.push_back(&*bias);
  }
  for (const at::Tensor* t : all)
    TORCH_CHECK(t->device() == x.device(), op, ": all tensors must be on one device; x is on ", x.device(),
                " but a parameter is on ", t->device());
  return {K, N};
}

std::vector<int64_t> linear_output_sizes(const at::Tensor& x, int64_t N) {
  std::vector<int64_t> sizes(x.sizes().begin(), x.sizes().end());
  sizes.back() = N;
  return sizes;
}

struct QuantizeInput {
  const char* op;
  fp8gemm::Fp8Format format;
  int64_t columns;  // of what x quantizes to
};

// The checks of quantize's inputs, the dtypes first (before anything is allocated).
QuantizeInput check_quantize_input(const at::Tensor& x, at::ScalarType dtype, bool silu_and_mul) {
  const char* op = quantize_op_name(silu_and_mul);
  TORCH_CHECK(x.defined(), op, ": x is an undefined tensor");
  input_type(op, x);
  const fp8gemm::Fp8Format format = fp8_format(op, dtype);
  return {op, format, quantized_columns(op, x, silu_and_mul)};
}

}  // namespace

void quantize_rows_into(const at::Tensor& x, at::ScalarType dtype, bool silu_and_mul, const at::Tensor& q_row,
                        const at::Tensor& q, const at::Tensor& scale) {
  const auto [op, format, columns] = check_quantize_input(x, dtype, silu_and_mul);
  if (q_row.defined())
    TORCH_CHECK(q_row.scalar_type() == at::kInt && q_row.dim() == 2 && q_row.size(0) == x.size(0) &&
                    q_row.is_contiguous() && q_row.device() == x.device() && !silu_and_mul,
                op, ": the row scatter must be contiguous int32 (", x.size(0),
                ", copies) on x's device, without SiLU-and-mul");
  const int64_t rows = q_row.defined() ? q.size(0) : x.size(0);  // of q
  TORCH_CHECK(q.scalar_type() == dtype && q.dim() == 2 && q.size(0) == rows && q.size(1) == columns &&
                  (columns <= 1 || q.stride(1) == 1) && q.device() == x.device(),
              op, ": q must be (", rows, ", ", columns, ") ", dtype, " with contiguous rows on ", x.device(),
              ", got ", q.sizes(), " ", q.scalar_type(), " with strides ", q.strides(), " on ", q.device());
  const int64_t k_blocks = fp8gemm::ceil_div(columns, fp8gemm::kScaleBlock);
  TORCH_CHECK(scale.scalar_type() == at::kFloat && scale.dim() == 2 && scale.size(0) == rows &&
                  scale.size(1) == k_blocks && scale.device() == x.device(),
              op, ": scale must be float32 (", rows, ", ", k_blocks, ") on ", x.device(), ", got ",
              scale.sizes(), " ", scale.scalar_type(), " on ", scale.device());
  const OnDevice on(op, x.device());
  run_quantize(op, x, silu_and_mul, format, quantized_rows(q, scale), q_row);
}

std::tuple<at::Tensor, at::Tensor> quantize(const at::Tensor& x, at::ScalarType dtype, bool silu_and_mul) {
  const auto [op, format, columns] = check_quantize_input(x, dtype, silu_and_mul);
  auto [q, scale] = empty_quantized(x.size(0), columns, dtype, x.device());
  const OnDevice on(op, x.device());
  run_quantize(op, x, silu_and_mul, format, quantized_rows(q, scale));
  return {q, scale};
}

void silu_and_mul(at::Tensor& out, const at::Tensor& x) {
  const char* op = "silu_and_mul";
  TORCH_CHECK(x.defined() && out.defined(), op, ": out and x are required");
  input_type(op, x);
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) % 2 == 0, op, ": x must be (..., 2d), got ", x.sizes());
  std::vector<int64_t> sizes(x.sizes().begin(), x.sizes().end());
  sizes.back() /= 2;
  TORCH_CHECK(out.sizes() == at::IntArrayRef(sizes) && out.scalar_type() == x.scalar_type() &&
                  out.device() == x.device(),
              op, ": out must be ", at::IntArrayRef(sizes), " ", x.scalar_type(), " on ", x.device(),
              ", got ", out.sizes(), " ", out.scalar_type(), " on ", out.device());
  TORCH_CHECK(out.is_contiguous() && !overlaps(out, x), op, ": out must be contiguous and not overlap x");
  const OnDevice on(op, x.device());
  const int64_t d = sizes.back();
  const at::Tensor rows = x.reshape({leading_rows(x), 2 * d});
  if (x.device().is_cpu() || rows.stride(1) != 1) {
    const at::Tensor gate = rows.narrow(1, 0, d).to(at::kFloat), up = rows.narrow(1, d, d).to(at::kFloat);
    out.copy_(gate.mul(at::sigmoid(gate)).mul(up).view(sizes));
    return;
  }
  fp8gemm::SiluMulArgs args;
  args.M = rows.size(0);
  args.K = d;
  args.dtype = input_type(op, x);
  args.x = rows.data_ptr();
  args.x_stride_m = rows.stride(0);
  args.out = out.data_ptr();
  args.out_stride_m = d;
#if defined(CUDA_KERNEL)
  check_status(op, fp8gemm::silu_mul_cuda(args, c10::cuda::getCurrentCUDAStream()));
#elif defined(ROCM_KERNEL)
  check_status(op, fp8gemm::silu_mul_rocm(args, current_hip_stream(x.device())));
#endif
}

namespace {

// fp8_linear, of x or (silu_and_mul) of silu(x[..., :K]) * x[..., K:].
at::Tensor quantized_linear(const char* op, const at::Tensor& x, bool silu_and_mul, const at::Tensor& weight,
                            const at::Tensor& weight_scale_inv, const std::optional<at::Tensor>& bias) {
  const auto [K, N] = check_linear(op, x, silu_and_mul, weight, weight_scale_inv, bias);
  const OnDevice on(op, x.device());
  const at::Tensor rows = x.reshape({leading_rows(x), x.size(-1)});
  const int64_t M = rows.size(0);
  at::Tensor out = at::empty({M, N}, x.options().dtype(at::kBFloat16));
  const bool has_bias = bias.has_value() && bias->defined();
  const at::Tensor bias16 = has_bias ? bias->to(at::kBFloat16) : at::Tensor();

  QuantizedRows quantized;
  const at::Tensor quantized_memory = empty_quantized_rows(M, K, x.device(), &quantized);
  run_quantize(op, rows, silu_and_mul, format_of(weight.scalar_type()), quantized);
  GemmArgs args = describe_b_and_out(kGemmNt, M, K, out, weight, weight_scale_inv);
  args.a = quantized.q;
  args.a_stride_m = quantized.q_stride_m;
  args.a_stride_k = 1;
  args.a_scale = quantized.scale;
  args.a_scale_stride_m = quantized.scale_stride_m;
  args.a_scale_stride_kb = quantized.scale_stride_kb;
  args.after_quantize = M > 0 && K > 0;  // run_quantize queued its kernel last
  if (has_bias) {
    args.bias = reinterpret_cast<const uint16_t*>(bias16.data_ptr());
    args.bias_stride = bias16.stride(0);
  }
  run_gemm(op, args, x.device());
  const at::Tensor result = out.view(linear_output_sizes(x, N));
  return x.scalar_type() == at::kBFloat16 ? result : result.to(x.scalar_type());
}

}  // namespace

at::Tensor fp8_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& weight_scale_inv,
                      const std::optional<at::Tensor>& bias) {
  return quantized_linear("fp8_linear", x, false, weight, weight_scale_inv, bias);
}

at::Tensor silu_and_mul_fp8_linear(const at::Tensor& x, const at::Tensor& weight,
                                   const at::Tensor& weight_scale_inv,
                                   const std::optional<at::Tensor>& bias) {
  return quantized_linear("silu_and_mul_fp8_linear", x, true, weight, weight_scale_inv, bias);
}

void gemm(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const at::Tensor& a_scale,
          const at::Tensor& b_scale) {
  run(kGemm, out, a, b, a_scale, b_scale);
}

void gemm_nt(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const at::Tensor& a_scale,
             const at::Tensor& b_scale) {
  run(kGemmNt, out, a, b, a_scale, b_scale);
}

void force_general_path(bool force) {
#if defined(CUDA_KERNEL)
  fp8gemm::gemm_cuda_force_general(force);
#else
  (void)force;
#endif
}

void force_tile_config(int64_t block_m, int64_t block_n, int64_t split) {
  constexpr int64_t kMaxDim = 1024;
  TORCH_CHECK(block_m >= 0 && block_m <= kMaxDim && block_n >= 0 && block_n <= kMaxDim && split >= 0 &&
                  split <= kMaxDim,
              "force_tile_config: no kernel for tile ", block_m, "x", block_n, " split ", split);
#if defined(CUDA_KERNEL)
  check_status("force_tile_config", fp8gemm::gemm_cuda_force_tile(int(block_m), int(block_n), int(split)));
#else
  (void)block_n, (void)split;
  TORCH_CHECK(block_m == 0, "force_tile_config: this build has no Hopper (sm_90a) path");
#endif
}

bool general_path_forced() {
#if defined(CUDA_KERNEL)
  return fp8gemm::gemm_cuda_general_forced();
#else
  return false;
#endif
}

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("gemm(Tensor! out, Tensor a, Tensor b, Tensor a_scale, Tensor b_scale) -> ()");
  ops.def("gemm_nt(Tensor! out, Tensor a, Tensor b, Tensor a_scale, Tensor b_scale) -> ()");
  ops.impl("gemm", at::kCPU, &gemm);
  ops.impl("gemm_nt", at::kCPU, &gemm_nt);
#if defined(CUDA_KERNEL) || defined(ROCM_KERNEL)
  ops.impl("gemm", at::kCUDA, &gemm);
  ops.impl("gemm_nt", at::kCUDA, &gemm_nt);
#endif
  ops.def("quantize(Tensor x, ScalarType dtype, bool silu_and_mul) -> (Tensor, Tensor)");
  ops.def("silu_and_mul(Tensor! out, Tensor x) -> ()");
  ops.def("fp8_linear(Tensor x, Tensor weight, Tensor weight_scale_inv, Tensor? bias) -> Tensor");
  ops.def(
      "silu_and_mul_fp8_linear(Tensor x, Tensor weight, Tensor weight_scale_inv, Tensor? bias) -> Tensor");
  ops.impl("quantize", at::kCPU, &quantize);
  ops.impl("silu_and_mul", at::kCPU, &silu_and_mul);
  ops.impl("fp8_linear", at::kCPU, &fp8_linear);
  ops.impl("silu_and_mul_fp8_linear", at::kCPU, &silu_and_mul_fp8_linear);
#if defined(CUDA_KERNEL) || defined(ROCM_KERNEL)
  ops.impl("quantize", at::kCUDA, &quantize);
  ops.impl("silu_and_mul", at::kCUDA, &silu_and_mul);
  ops.impl("fp8_linear", at::kCUDA, &fp8_linear);
  ops.impl("silu_and_mul_fp8_linear", at::kCUDA, &silu_and_mul_fp8_linear);
#endif
  ops.def("moe_route(Tensor top_k_index, int num_experts) -> (Tensor, Tensor, Tensor)");
  ops.def(
      "grouped_gemm_nt(Tensor! out, Tensor a, Tensor a_scale, Tensor? row_index, Tensor b, Tensor b_scale, "
      "Tensor expert_rows, bool masked) -> ()");
  ops.def("moe_combine(Tensor rows, Tensor slot_row, Tensor top_k_weights, ScalarType out_dtype) -> Tensor");
  ops.def(
      "fp8_experts(Tensor x, Tensor top_k_index, Tensor top_k_weights, Tensor w_in, Tensor w_in_scale, "
      "Tensor w_out, Tensor w_out_scale, bool gated) -> Tensor");
  ops.impl("moe_route", at::kCPU, &moe_route);
  ops.impl("grouped_gemm_nt", at::kCPU, &grouped_gemm_nt);
  ops.impl("moe_combine", at::kCPU, &moe_combine);
  ops.impl("fp8_experts", at::kCPU, &fp8_experts);
#if defined(CUDA_KERNEL) || defined(ROCM_KERNEL)
  ops.impl("moe_route", at::kCUDA, &moe_route);
  ops.impl("grouped_gemm_nt", at::kCUDA, &grouped_gemm_nt);
  ops.impl("moe_combine", at::kCUDA, &moe_combine);
  ops.impl("fp8_experts", at::kCUDA, &fp8_experts);
#endif
  ops.def("force_general_path(bool force) -> ()", &force_general_path);
  ops.def("general_path_forced() -> bool", &general_path_forced);
  ops.def("force_tile_config(int block_m, int block_n, int split) -> ()", &force_tile_config);
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
