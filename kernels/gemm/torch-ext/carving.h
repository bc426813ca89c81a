#pragma once
// Buffers carved out of one allocation, for the binding's per-call intermediates: one call to the
// allocator instead of one per buffer, and no transposed views (host time, which an eager call
// waits for; DESIGN.md, "Mixtures of experts").
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>

#include <cstdint>

namespace binding {

class Carving {
 public:
  // Reserves a piece of `elements` of `dtype`, 256-byte aligned; returns its byte offset.
  int64_t reserve(int64_t elements, at::ScalarType dtype) {
    constexpr int64_t kAlign = 256;
    const int64_t at = bytes_;
    bytes_ += (elements * int64_t(c10::elementSize(dtype)) + kAlign - 1) / kAlign * kAlign;
    return at;
  }

  // Allocates every reservation at once; returns the allocation, which owns them.
  const at::Tensor& allocate(const at::Device& device) {
    memory_ = at::empty({bytes_}, at::dtype(at::kByte).device(device));
    return memory_;
  }

  template <typename T>
  T* pointer(int64_t offset) const {
    return reinterpret_cast<T*>(static_cast<uint8_t*>(memory_.data_ptr()) + offset);
  }

  // A tensor over the piece reserved at `offset`, keeping the whole allocation alive (its device
  // named: no pointer query).
  at::Tensor piece(int64_t offset, at::ScalarType dtype, at::IntArrayRef sizes,
                   at::IntArrayRef strides) const {
    int64_t last = 0;  // the farthest element from the first
    for (size_t d = 0; d < sizes.size(); ++d) last += (sizes[d] - 1) * strides[d];
    TORCH_INTERNAL_ASSERT(offset + (last + 1) * int64_t(c10::elementSize(dtype)) <= bytes_,
                          "Carving: a piece reaches past the reserved bytes");
    const at::Tensor keep = memory_;
    return at::from_blob(
        pointer<uint8_t>(offset), sizes, strides, [keep](void*) {}, memory_.options().dtype(dtype),
        memory_.device());
  }

 private:
  int64_t bytes_ = 0;
  at::Tensor memory_;
};

}  // namespace binding
