// How fast the tensor pipe runs the consumers' pattern with nothing else in the way: no
// operand loads (shared memory holds fixed bytes). Every CTA (one per SM) has W warpgroups;
// each repeats, per "K block", 4 x wgmma m64n128k32 (e4m3, both operands from shared memory)
// into a scratch accumulator, waits for them and promotes the scratch into a second
// accumulator with one FFMA per element (the kernel's per-block work); or, for the bare MMA
// rate, accumulates without waiting; the same for the other wgmma widths of the kernel's
// tiles (64 to 192). Then the kernel's frame step by step (producer, mbarriers, stages,
// turns, scales: probe_pipeline). Prints clocks per K block per CTA and the tensor pipe's
// share of them (N / 2 clocks per m64nNk32 at the FP8 dense rate). NOTES-sm90.md runs 23 and
// 31 have the numbers.
//
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I kernels/gemm \
//     -o wgmma_probe kernels/gemm/benchmarks/sm90_harness/wgmma_probe.cu
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>

#include "gemm_sm90/sm90_ptx.cuh"
#include "gemm_sm90/wgmma_fp8.cuh"

using namespace fp8gemm::sm90;

constexpr int kBlocks = 2000;  // K blocks per warpgroup
// A 64 x 128 and B N x 128 bytes per warpgroup
__host__ __device__ constexpr int tile_bytes(int n) { return 64 * 128 + n * 128; }

// kPromote: wait and promote per K block; else accumulate, no waits. N: the wgmma width.
// kA: where the MMAs' A comes from: 0 shared memory (a descriptor); 1 registers holding fixed
// values; 2 registers loaded per block from M-contiguous shared memory by ldmatrix.trans and
// byte permutes, as the kernel's consumers do for M-contiguous A (64-byte rows).
template <int W, bool kPromote, int N = 128, int kA = 0>
__global__ void __launch_bounds__(128 * W, 1) probe(float* sink, long long* clocks) {
  constexpr int kTileBytes = tile_bytes(N);
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const int wg = threadIdx.x / 128;
  for (int i = threadIdx.x; i < W * kTileBytes / 4; i += blockDim.x)
    reinterpret_cast<uint32_t*>(smem)[i] = 0x38383838u ^ (i * 0x01010101u & 0x07070707u);  // small finite e4m3
  fence_proxy_async_smem();
  __syncthreads();
  const uint64_t da = smem_desc_k128_sw128(smem + wg * kTileBytes);
  const uint64_t db = smem_desc_k128_sw128(smem + wg * kTileBytes + 64 * 128);
  float part[N / 2], acc[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) part[i] = acc[i] = 0.f;
  const float s = 1.0f + threadIdx.x * 1e-7f;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32 % 4;
  const int i = lane / 8, j = lane % 8, tr = j / 2;
  const int k = 16 * (i / 2) + 4 * tr + 2 * ((i % 2) ^ (tr / 2)) + j % 2;
  const uint32_t a_addr = smem_addr(smem + wg * kTileBytes) + k * 64 + ((warp ^ ((k / 2) % 4)) << 4);
  uint32_t fr[4][4];
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
#pragma unroll
    for (int q = 0; q < 4; ++q) fr[kk][q] = 0x38383838u;
  const long long t0 = clock64();
  for (int b = 0; b < kBlocks; ++b) {
    if constexpr (kA == 2) {
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        uint32_t r[4];
        ldmatrix_x4_trans(r, a_addr + kk * 2048);
        fr[kk][0] = __byte_perm(r[0], r[1], 0x6420);
        fr[kk][1] = __byte_perm(r[0], r[1], 0x7531);
        fr[kk][2] = __byte_perm(r[2], r[3], 0x6420);
        fr[kk][3] = __byte_perm(r[2], r[3], 0x7531);
      }
    }
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      if constexpr (kA == 0)
        wgmma_fp8<N>(part, da + 2 * kk, db + 2 * kk, kPromote ? kk : 1);
      else
        wgmma_fp8_rs<N>(part, fr[kk], db + 2 * kk, kPromote ? kk : 1);
    }
    wgmma_commit();
    if constexpr (kPromote) {
      wgmma_wait<0>();
#pragma unroll
      for (int i = 0; i < N / 2; ++i) asm volatile("fma.rn.f32 %0, %1, %2, %0;" : "+f"(acc[i]) : "f"(part[i]), "f"(s));
    }
  }
  wgmma_wait<0>();
  const long long t1 = clock64();
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < N / 2; ++i) sum += acc[i] + part[i];
  sink[blockIdx.x * blockDim.x + threadIdx.x] = sum;
  if (threadIdx.x % 128 == 0) clocks[blockIdx.x * W + wg] = t1 - t0;
}

// The same work in the kernel's frame: warpgroup 0 produces (one thread; it only passes
// the stages round through full/empty mbarriers, no loads), 3 consumer warpgroups walk
// kStages stage buffers and promote after every K block; optionally they take turns to
// issue (named barriers, as the kernel) and read per-block scales (B scale from global
// memory 4 blocks ahead, A scale from shared memory, as the kernel).
// kScales: bit 0 B scales from global, bit 1 A scales from smem. kRandom: operand bytes from
// a hash (random e4m3 values, as real data) instead of a fixed pattern. kEpilogue: every 56
// blocks (one K = 7168 tile) the consumers convert the accumulator to bf16 into shared
// memory, synchronise, and start the next tile from zero, as the kernel's epilogue does
// (without the TMA store).
template <bool kTurns, int kScales, bool kRandom = false, bool kEpilogue = false>
__global__ void __launch_bounds__(512, 1) probe_pipeline(float* sink, long long* clocks, const float* sb) {
  constexpr int kStages = 4, kStageBytes = (192 + 128) * 128;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kStages * kStageBytes);
  uint64_t* empty = full + kStages;
  float* sa = reinterpret_cast<float*>(empty + kStages);
  const int wg = threadIdx.x / 128, warp = threadIdx.x / 32 % 4, lane = threadIdx.x % 32;
  for (int i = threadIdx.x; i < kStages * kStageBytes / 4; i += blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    reinterpret_cast<uint32_t*>(smem)[i] = kRandom ? h & 0x7e7e7e7eu : 0x38383838u ^ (i * 0x01010101u & 0x07070707u);
  }
  for (int i = threadIdx.x; i < kStages * 192; i += blockDim.x) sa[i] = 1.0f;
  if (threadIdx.x == 0)
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], 12);
    }
  mbar_fence_init();
  fence_proxy_async_smem();
  __syncthreads();
  if (wg == 0) {
    regs_decrease<24>();
    if (threadIdx.x == 0)
      for (int b = 0, stage = 0, phase = 0; b < kBlocks; ++b) {
        mbar_wait(&empty[stage], phase ^ 1);
        mbar_arrive(&full[stage]);
        if (++stage == kStages) stage = 0, phase ^= 1;
      }
    return;
  }
  regs_increase<160>();
  const int ci = wg - 1;
  float part[64], acc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) part[i] = acc[i] = 0.f;
  float scales[4] = {1.f, 1.f, 1.f, 1.f};
  if (kScales & 1)
#pragma unroll
    for (int i = 0; i < 4; ++i) scales[i] = __ldg(sb + i);
  bool first = true;
  const long long t0 = clock64();
  int stage = 0, phase = 0;
  for (int b = 0; b < kBlocks; b += 4) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      mbar_wait(&full[stage], phase);
      float s0 = scales[i], s1 = scales[i];
      if (kScales & 2) {
        s0 *= sa[stage * 192 + ci * 64 + warp * 16 + lane / 4];
        s1 *= sa[stage * 192 + ci * 64 + warp * 16 + lane / 4 + 8];
      }
      if (kTurns && (ci != 0 || !first)) named_barrier(5 + ci, 256);
      first = false;
      const uint64_t da = smem_desc_k128_sw128(smem + stage * kStageBytes + ci * 64 * 128);
      const uint64_t db = smem_desc_k128_sw128(smem + stage * kStageBytes + 192 * 128);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) wgmma_fp8<128>(part, da + 2 * kk, db + 2 * kk, kk);
      wgmma_commit();
      if (kTurns) named_barrier_arrive(5 + (ci + 1) % 3, 256);
      wgmma_wait<0>();
      if (lane == 0) mbar_arrive(&empty[stage]);
#pragma unroll
      for (int j = 0; j < 64; ++j)
        asm volatile("fma.rn.f32 %0, %1, %2, %0;" : "+f"(acc[j]) : "f"(part[j]), "f"(j % 4 < 2 ? s0 : s1));
      if (kScales & 1) scales[i] = __ldg(sb + (b + i + 4) % 1024);
      if (++stage == kStages) stage = 0, phase ^= 1;
    }
    if (kEpilogue && (b + 4) % 56 == 0) {
      uint32_t* out = reinterpret_cast<uint32_t*>(smem + kStages * kStageBytes + 4096) + ci * 64 * 64;
      named_barrier(2 + ci, 128);
#pragma unroll
      for (int j = 0; j < 32; ++j) {
        __nv_bfloat162 v = __floats2bfloat162_rn(acc[2 * j], acc[2 * j + 1]);
        out[(threadIdx.x % 128) * 32 + (j ^ (lane % 8))] = *reinterpret_cast<uint32_t*>(&v);
        acc[2 * j] = acc[2 * j + 1] = 0.f;
      }
      fence_proxy_async_smem();
      named_barrier(2 + ci, 128);
    }
  }
  if (kTurns && ci == 0) named_barrier(5, 256);
  const long long t1 = clock64();
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < 64; ++i) sum += acc[i];
  sink[blockIdx.x * blockDim.x + threadIdx.x] = sum;
  if (threadIdx.x % 128 == 0) clocks[blockIdx.x * 3 + ci] = t1 - t0;
}

template <typename Kernel, typename... Args>
void time_kernel(const char* name, Kernel kernel, int threads, int clocks_per_cta, int smem, int sms, double mma,
                 Args... args) {
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  float* sink;
  long long* clocks;
  cudaMalloc(&sink, sizeof(float) * sms * threads);
  cudaMalloc(&clocks, sizeof(long long) * sms * clocks_per_cta);
  kernel<<<sms, threads, smem>>>(sink, clocks, args...);  // warm-up
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaEventRecord(e0);
  kernel<<<sms, threads, smem>>>(sink, clocks, args...);
  cudaEventRecord(e1);
  if (cudaEventSynchronize(e1) != cudaSuccess) {
    std::printf("%s: launch failed: %s\n", name, cudaGetErrorString(cudaGetLastError()));
    return;
  }
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  long long* host = new long long[sms * clocks_per_cta];
  cudaMemcpy(host, clocks, sizeof(long long) * sms * clocks_per_cta, cudaMemcpyDeviceToHost);
  double mean = 0;
  for (int i = 0; i < sms * clocks_per_cta; ++i) mean += double(host[i]) / (sms * clocks_per_cta);
  const double per_block = mean / kBlocks;
  std::printf("%-34s %7.1f clocks per K block  tensor share %5.1f%%  %.1f us  (%.2f GHz)\n", name, per_block,
              100.0 * mma / per_block, ms * 1e3, mean / (ms * 1e6));
  delete[] host;
  cudaFree(sink);
  cudaFree(clocks);
}

// m64nNk32 takes N / 2 tensor clocks at the FP8 dense rate
template <int W, bool kPromote, int N = 128, int kA = 0>
void run(const char* name, int sms) {
  char label[64];
  const char* a = kA == 0 ? "" : kA == 1 ? ", A regs" : ", A ldmatrix";
  if constexpr (N == 128)
    std::snprintf(label, sizeof label, "%s, W=%d%s", name, W, a);
  else
    std::snprintf(label, sizeof label, "%s, W=%d, n%d%s", name, W, N, a);
  time_kernel(label, probe<W, kPromote, N, kA>, 128 * W, W, W * tile_bytes(N) + 1024, sms, 4.0 * (N / 2) * W);
}

// The wgmma widths of the kernel's tiles, bare and with the per-block wait and promotion
// (three warpgroups have not the registers for a 192-wide promotion).
template <int N>
void run_width(int sms) {
  run<1, false, N>("no wait (accumulate on)", sms);
  run<3, false, N>("no wait (accumulate on)", sms);
  run<2, true, N>("wait + promote", sms);
  if constexpr (N <= 144) run<3, true, N>("wait + promote", sms);
}

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  run<1, true>("wait + promote", sms);
  run<2, true>("wait + promote", sms);
  run<3, true>("wait + promote", sms);
  run<1, false>("no wait (accumulate on)", sms);
  run<2, false>("no wait (accumulate on)", sms);
  run<3, false>("no wait (accumulate on)", sms);
  for (int rep = 0; rep < 2; ++rep) {  // A from registers (M-contiguous A), against shared memory
    run<2, true, 128, 0>("wait + promote", sms);
    run<2, true, 128, 1>("wait + promote", sms);
    run<2, true, 128, 2>("wait + promote", sms);
    run<3, true, 128, 0>("wait + promote", sms);
    run<3, true, 128, 1>("wait + promote", sms);
    run<3, true, 128, 2>("wait + promote", sms);
  }
  run_width<64>(sms);
  run_width<72>(sms);
  run_width<96>(sms);
  run_width<144>(sms);
  run_width<192>(sms);
  float* sb;
  cudaMalloc(&sb, 1024 * sizeof(float));
  cudaMemset(sb, 0, 1024 * sizeof(float));
  const int smem = 4 * (192 + 128) * 128 + 1024 + 4096 + 3 * 64 * 64 * 4;
  time_kernel("pipeline", probe_pipeline<false, 0>, 512, 3, smem, sms, 768.0, (const float*)sb);
  time_kernel("pipeline + turns", probe_pipeline<true, 0>, 512, 3, smem, sms, 768.0, (const float*)sb);
  time_kernel("pipeline + B scales (global)", probe_pipeline<false, 1>, 512, 3, smem, sms, 768.0, (const float*)sb);
  time_kernel("pipeline + A scales (smem)", probe_pipeline<false, 2>, 512, 3, smem, sms, 768.0, (const float*)sb);
  time_kernel("pipeline + both scales", probe_pipeline<false, 3>, 512, 3, smem, sms, 768.0, (const float*)sb);
  time_kernel("pipeline + turns + both scales", probe_pipeline<true, 3>, 512, 3, smem, sms, 768.0, (const float*)sb);
  time_kernel("  + random operands", probe_pipeline<true, 3, true>, 512, 3, smem, sms, 768.0, (const float*)sb);
  time_kernel("  + random operands + epilogue", probe_pipeline<true, 3, true, true>, 512, 3, smem, sms, 768.0,
              (const float*)sb);
  return 0;
}
