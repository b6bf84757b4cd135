#include "tensor/view.hpp"

#include <bit>
#include <cstring>
#include <stdexcept>

namespace kbv::tensor {

// The views reinterpret little-endian bytes in place.
static_assert(std::endian::native == std::endian::little, "kbv reads tensors in place");

namespace {

template <class T, class Convert>
void decode_block(const std::byte* src, std::span<double> out, Convert convert) {
  for (size_t i = 0; i < out.size(); ++i) {
    T v;
    std::memcpy(&v, src + i * sizeof(T), sizeof(T));
    out[i] = convert(v);
  }
}

template <class T>
void decode_block(const std::byte* src, std::span<double> out) {
  decode_block<T>(src, out, [](T v) { return static_cast<double>(v); });
}

}  // namespace

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;
  return n;
}

double TensorView::value_at(int64_t i) const {
  double v = 0;
  decode(i, std::span<double>(&v, 1));
  return v;
}

void TensorView::decode(int64_t first, std::span<double> out) const {
  const size_t size = element_size(dtype);
  if (first < 0 || (static_cast<size_t>(first) + out.size()) * size > nbytes) {
    throw std::out_of_range("elements [" + std::to_string(first) + ", " +
                            std::to_string(first + static_cast<int64_t>(out.size())) +
                            ") of tensor '" + name + "' with " + std::to_string(numel()) +
                            " elements");
  }
  const std::byte* src = data + static_cast<size_t>(first) * size;
  switch (dtype) {
    case DType::F64:
      return decode_block<double>(src, out);
    case DType::F32:
      return decode_block<float>(src, out);
    case DType::F16:
      return decode_block<uint16_t>(src, out, [](uint16_t b) { return half_to_float(b); });
    case DType::BF16:
      return decode_block<uint16_t>(src, out, [](uint16_t b) { return bfloat16_to_float(b); });
    case DType::I64:
      return decode_block<int64_t>(src, out);
    case DType::I32:
      return decode_block<int32_t>(src, out);
    case DType::I16:
      return decode_block<int16_t>(src, out);
    case DType::I8:
      return decode_block<int8_t>(src, out);
    case DType::U8:
      return decode_block<uint8_t>(src, out);
    case DType::Bool:
      return decode_block<uint8_t>(src, out, [](uint8_t b) { return b != 0 ? 1.0 : 0.0; });
  }
}

TensorView flat_view(const void* data, DType dtype, int64_t numel, std::string name) {
  return TensorView{.name = std::move(name),
                    .dtype = dtype,
                    .shape = {numel},
                    .data = static_cast<const std::byte*>(data),
                    .nbytes = static_cast<size_t>(numel) * element_size(dtype)};
}

}  // namespace kbv::tensor
