// Torch binding of the FP8 block-scaled GEMM: checks every input, describes the call as a
// fp8gemm::GemmArgs (strides passed through, nothing copied) and runs the backend's launcher
// on the current stream.
#include <torch/all.h>
#include <torch/library.h>

#include <algorithm>
#include <numeric>

#include "gemm_common/gemm_args.h"
#include "gemm_common/launchers.h"
#include "registration.h"
#include "torch_binding.h"

#if defined(CUDA_KERNEL)
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#elif defined(ROCM_KERNEL)
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#endif

namespace {

using fp8gemm::GemmArgs;

bool is_fp8(at::ScalarType t) {
  return t == at::kFloat8_e4m3fn || t == at::kFloat8_e4m3fnuz;
}

// [first byte, one past the last byte] that a tensor's elements can touch.
std::pair<uintptr_t, uintptr_t> byte_span(const torch::Tensor& t) {
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
bool elements_share_memory(const torch::Tensor& t) {
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
bool overlaps(const torch::Tensor& x, const torch::Tensor& y) {
  if (x.numel() == 0 || y.numel() == 0) return false;
  const auto [x0, x1] = byte_span(x);
  const auto [y0, y1] = byte_span(y);
  return x0 < y1 && y0 < x1;
}

// The two operand layouts the ops take: gemm's (b (K, N), scales K-block first) and gemm_nt's
// (b (N, K), scales K-block last, as DeepGEMM, vLLM and torch._scaled_mm take them). Both describe
// the same GemmArgs; gemm_nt's only swaps strides, so no transposed views are made per call.
struct Layout {
  const char* op;
  bool nt;
};
constexpr Layout kGemm{"gemm", false}, kGemmNt{"gemm_nt", true};

void check_inputs(const Layout& l, const torch::Tensor& out, const torch::Tensor& a, const torch::Tensor& b,
                  const torch::Tensor& a_scale, const torch::Tensor& b_scale) {
  const char* op = l.op;
  const std::pair<const char*, const torch::Tensor*> all[] = {
      {"out", &out}, {"a", &a}, {"b", &b}, {"a_scale", &a_scale}, {"b_scale", &b_scale}};
  for (const auto& [name, t] : all) {
    TORCH_CHECK(t->defined(), op, ": ", name, " is an undefined tensor");
    TORCH_CHECK(t->device() == a.device(), op, ": all tensors must be on one device; a is on ",
                a.device(), " but ", name, " is on ", t->device());
  }
  TORCH_CHECK(a.dim() == 2, op, ": a must be 2-D (M, K), got ", a.dim(), "-D");
  TORCH_CHECK(b.dim() == 2, op, ": b must be 2-D ", l.nt ? "(N, K)" : "(K, N)", ", got ", b.dim(), "-D");
  TORCH_CHECK(is_fp8(a.scalar_type()), op, ": a must be float8_e4m3fn or float8_e4m3fnuz, got ",
              a.scalar_type());
  TORCH_CHECK(b.scalar_type() == a.scalar_type(), op, ": b must have a's dtype ", a.scalar_type(),
              ", got ", b.scalar_type());
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
  TORCH_CHECK(!elements_share_memory(out), op,
              ": out must not have elements that share memory (e.g. an expanded tensor or overlapping strides)");
  for (const auto& [name, t] : all)
    TORCH_CHECK(t == &out || !overlaps(out, *t), op, ": out must not overlap the memory of ", name);
}

GemmArgs describe(const Layout& l, torch::Tensor& out, const torch::Tensor& a, const torch::Tensor& b,
                  const torch::Tensor& a_scale, const torch::Tensor& b_scale) {
  // The dimension of the given tensor that holds dimension d of gemm's layout.
  auto nt_dim = [&](int d) { return l.nt ? 1 - d : d; };
  GemmArgs args;
  args.M = a.size(0);
  args.K = a.size(1);
  args.N = b.size(nt_dim(1));
  args.format = a.scalar_type() == at::kFloat8_e4m3fnuz ? fp8gemm::Fp8Format::E4M3FNUZ
                                                        : fp8gemm::Fp8Format::E4M3FN;
  args.a = static_cast<const uint8_t*>(a.data_ptr());
  args.a_stride_m = a.stride(0);
  args.a_stride_k = a.stride(1);
  args.b = static_cast<const uint8_t*>(b.data_ptr());
  args.b_stride_k = b.stride(nt_dim(0));
  args.b_stride_n = b.stride(nt_dim(1));
  args.a_scale = a_scale.data_ptr<float>();
  args.a_scale_stride_kb = a_scale.stride(nt_dim(0));
  args.a_scale_stride_m = a_scale.stride(nt_dim(1));
  args.b_scale = b_scale.data_ptr<float>();
  args.b_scale_stride_kb = b_scale.stride(nt_dim(0));
  args.b_scale_stride_nb = b_scale.stride(nt_dim(1));
  args.out = reinterpret_cast<uint16_t*>(out.data_ptr());
  args.out_stride_m = out.stride(0);
  args.out_stride_n = out.stride(1);
  return args;
}

void check_status(const char* op, fp8gemm::Status status) {
  TORCH_CHECK(status == fp8gemm::kOk, op, ": ", status);
}

// Device memory the launcher asks for, from torch's caching allocator; none (an undefined
// tensor, nullptr) when it asks for 0 bytes, as it does on most calls: an empty allocation
// costs a microsecond or two of host time per call.
torch::Tensor workspace_tensor(size_t bytes, const torch::Device& device) {
  if (bytes == 0) return {};
  return torch::empty({int64_t(bytes)}, torch::dtype(torch::kUInt8).device(device));
}

void* data_or_null(const torch::Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }
size_t size_or_zero(const torch::Tensor& t) { return t.defined() ? size_t(t.numel()) : 0; }

void run(const Layout& l, torch::Tensor& out, const torch::Tensor& a, const torch::Tensor& b,
         const torch::Tensor& a_scale, const torch::Tensor& b_scale) {
  const char* op = l.op;
  check_inputs(l, out, a, b, a_scale, b_scale);
  const GemmArgs args = describe(l, out, a, b, a_scale, b_scale);
  if (args.M == 0 || args.N == 0) return;
  if (a.device().is_cpu()) {
    check_status(op, fp8gemm::gemm_cpu(args));
    return;
  }
#if defined(CUDA_KERNEL)
  TORCH_CHECK(a.device().is_cuda(), op, ": tensors must be on a CUDA device or the CPU, got ", a.device());
  const c10::cuda::CUDAGuard guard(a.device());
  int major = 0, minor = 0;
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, a.get_device()));
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, a.get_device()));
  const int device_sm = 10 * major + minor;
  const torch::Tensor workspace =
      workspace_tensor(fp8gemm::gemm_cuda_workspace_bytes(args, device_sm), a.device());
  check_status(op, fp8gemm::gemm_cuda(args, data_or_null(workspace), size_or_zero(workspace),
                                      c10::cuda::getCurrentCUDAStream()));
#elif defined(ROCM_KERNEL)
  // ROCm builds of torch present HIP devices as "cuda".
  TORCH_CHECK(a.device().is_cuda(), op, ": tensors must be on a ROCm (cuda) device or the CPU, got ",
              a.device());
  const c10::DeviceGuard guard(a.device());
  const c10::impl::VirtualGuardImpl device_impl(a.device().type());
  const torch::Tensor workspace =
      workspace_tensor(fp8gemm::gemm_rocm_workspace_bytes(args), a.device());
  auto* stream = static_cast<hipStream_t>(device_impl.getStream(a.device()).native_handle());
  check_status(op, fp8gemm::gemm_rocm(args, data_or_null(workspace), size_or_zero(workspace), stream));
#else
  TORCH_CHECK(false, op, ": this build runs on the CPU only; tensors are on ", a.device());
#endif
}

}  // namespace

void gemm(torch::Tensor& out, const torch::Tensor& a, const torch::Tensor& b,
          const torch::Tensor& a_scale, const torch::Tensor& b_scale) {
  run(kGemm, out, a, b, a_scale, b_scale);
}

void gemm_nt(torch::Tensor& out, const torch::Tensor& a, const torch::Tensor& b,
             const torch::Tensor& a_scale, const torch::Tensor& b_scale) {
  run(kGemmNt, out, a, b, a_scale, b_scale);
}

void force_general_path(bool force) {
#if defined(CUDA_KERNEL)
  fp8gemm::gemm_cuda_force_general(force);
#else
  (void)force;
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
  ops.impl("gemm", torch::kCPU, &gemm);
  ops.impl("gemm_nt", torch::kCPU, &gemm_nt);
#if defined(CUDA_KERNEL) || defined(ROCM_KERNEL)
  ops.impl("gemm", torch::kCUDA, &gemm);
  ops.impl("gemm_nt", torch::kCUDA, &gemm_nt);
#endif
  ops.def("force_general_path(bool force) -> ()", &force_general_path);
  ops.def("general_path_forced() -> bool", &general_path_forced);
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
