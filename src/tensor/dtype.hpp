#pragma once

// Element types of the tensors kbv judges, and their exact decoding to double. Header-only and
// nvcc-safe (C++17, no fmt, no json): the device comparison kernels decode elements with the same
// functions as the host pass, so both read every dtype identically.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

// Marks functions compiled for both the host and a CUDA device; empty for a host compiler.
#ifndef KBV_HD
#ifdef __CUDACC__
#define KBV_HD __host__ __device__
#else
#define KBV_HD
#endif
#endif

namespace kbv::tensor {

enum class DType { F64, F32, F16, BF16, I64, I32, I16, I8, U8, Bool };

inline constexpr DType kAllDTypes[] = {DType::F64, DType::F32, DType::F16, DType::BF16,
                                       DType::I64, DType::I32, DType::I16, DType::I8,
                                       DType::U8,  DType::Bool};

KBV_HD constexpr std::size_t element_size(DType d) {
  switch (d) {
    case DType::F64:
    case DType::I64:
      return 8;
    case DType::F32:
    case DType::I32:
      return 4;
    case DType::F16:
    case DType::BF16:
    case DType::I16:
      return 2;
    case DType::I8:
    case DType::U8:
    case DType::Bool:
      return 1;
  }
  return 0;
}

KBV_HD constexpr bool is_floating(DType d) {
  return d == DType::F64 || d == DType::F32 || d == DType::F16 || d == DType::BF16;
}

// "float32", "int64", "bool", ... as torch prints them (without the "torch." prefix).
constexpr std::string_view torch_name(DType d) {
  switch (d) {
    case DType::F64:
      return "float64";
    case DType::F32:
      return "float32";
    case DType::F16:
      return "float16";
    case DType::BF16:
      return "bfloat16";
    case DType::I64:
      return "int64";
    case DType::I32:
      return "int32";
    case DType::I16:
      return "int16";
    case DType::I8:
      return "int8";
    case DType::U8:
      return "uint8";
    case DType::Bool:
      return "bool";
  }
  return "?";
}

// The inverse of torch_name; also accepts torch's "torch.float32" spelling.
constexpr std::optional<DType> parse_torch_dtype(std::string_view name) {
  if (name.substr(0, 6) == "torch.") name.remove_prefix(6);
  for (const DType d : kAllDTypes) {
    if (torch_name(d) == name) return d;
  }
  return std::nullopt;
}

KBV_HD inline float bits_to_float(std::uint32_t bits) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
#endif
}

// Exact decoders for the 16-bit float formats (every fp16 and bf16 value is a float).
KBV_HD inline float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  const std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in float.
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign ? -magnitude : magnitude;
  }
  return bits_to_float(exponent == 0x1f ? sign | 0x7f800000u | (mantissa << 13)  // Inf/NaN
                                        : sign | ((exponent + 112) << 23) | (mantissa << 13));
}

KBV_HD inline float bfloat16_to_float(std::uint16_t b) {
  return bits_to_float(static_cast<std::uint32_t>(b) << 16);
}

namespace detail {
// Device tensors are aligned to their element size (the kernels check it), so a plain load is
// used there; memcpy on the device could not assume the alignment and would load bytewise.
template <class T>
KBV_HD inline T load(const unsigned char* p) {
#ifdef __CUDA_ARCH__
  return *reinterpret_cast<const T*>(p);
#else
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
#endif
}
}  // namespace detail

// Element i of a contiguous little-endian array of `d`, converted to double exactly (int64
// beyond 2^53 rounds). The dtype switch is uniform across a warp, so a kernel may call it per
// element; host passes over many elements use TensorView::decode, which dispatches per block.
KBV_HD inline double load_as_double(const void* base, DType d, std::int64_t i) {
  const auto* p =
      static_cast<const unsigned char*>(base) + static_cast<std::size_t>(i) * element_size(d);
  switch (d) {
    case DType::F64:
      return detail::load<double>(p);
    case DType::F32:
      return detail::load<float>(p);
    case DType::F16:
      return half_to_float(detail::load<std::uint16_t>(p));
    case DType::BF16:
      return bfloat16_to_float(detail::load<std::uint16_t>(p));
    case DType::I64:
      return static_cast<double>(detail::load<std::int64_t>(p));
    case DType::I32:
      return detail::load<std::int32_t>(p);
    case DType::I16:
      return detail::load<std::int16_t>(p);
    case DType::I8:
      return detail::load<std::int8_t>(p);
    case DType::U8:
      return detail::load<std::uint8_t>(p);
    case DType::Bool:
      return *p != 0 ? 1.0 : 0.0;
  }
  return 0;
}

}  // namespace kbv::tensor
