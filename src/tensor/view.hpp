#pragma once

// A non-owning view of a contiguous tensor in host memory: whatever holds the bytes (a shared
// arena, a Python tensor, a test's vector) lends them as a TensorView for the host comparison.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tensor/dtype.hpp"

namespace kbv::tensor {

// A contiguous, little-endian, row-major tensor. `name` only labels error messages.
struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const std::byte* data = nullptr;
  size_t nbytes = 0;

  int64_t numel() const;
  // Element i (flat, row-major) converted to double; fp16/bf16 are decoded exactly.
  double value_at(int64_t i) const;
  // Elements [first, first + out.size()) converted to double: one dtype dispatch per block, so
  // passes over 1e8 elements stay cheap. Throws std::out_of_range outside the view's bytes.
  void decode(int64_t first, std::span<double> out) const;
};

// A flat view of `numel` elements at `data` (the shape is [numel]).
TensorView flat_view(const void* data, DType dtype, int64_t numel, std::string name = "tensor");

}  // namespace kbv::tensor
