// Keyed checksums of memory: the reference takes one of every input arena before the candidate
// sees it and after each call, so an input changed in place is caught without keeping a copy.
//
// The checksum is an order-independent sum (mod 2^64) over the buffer's 8-byte words of a keyed
// mix of (word, position): a change of any byte changes its word's term to an unrelated value,
// so the sum changes unless the new terms happen to cancel, which a candidate that does not know
// the key can neither arrange nor find out (it never sees a checksum). Order independence lets
// the device sum the terms in whatever order its threads finish. Header part nvcc-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tensor/dtype.hpp"  // KBV_HD

#if KBV_NATIVE_CUDA || defined(__CUDACC__)
#include <cuda_runtime_api.h>
#else
struct CUstream_st;
using cudaStream_t = CUstream_st*;
#endif

namespace kbv::native {

// MurmurHash3's 64-bit finaliser: a bijection in which every input bit flips each output bit
// with probability close to 1/2.
KBV_HD inline std::uint64_t Fmix64(std::uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}

// Three independent sub-keys derived from the caller's key.
struct ChecksumKeys {
  std::uint64_t position, word, length;
};

KBV_HD inline ChecksumKeys DeriveChecksumKeys(std::uint64_t key) {
  return {Fmix64(key ^ 0x243f6a8885a308d3ULL), Fmix64(key ^ 0x13198a2e03707344ULL),
          Fmix64(key ^ 0xa4093822299f31d0ULL)};
}

// The term of word `index`: the word is whitened with a keyed pad unique to its position (so
// moving words changes the sum; a multiply rather than a third finaliser round, which cost a
// fifth of the host's speed), then passed through two keyed rounds of the finaliser.
KBV_HD inline std::uint64_t ChecksumTerm(std::uint64_t word, std::uint64_t index,
                                         const ChecksumKeys& k) {
  const std::uint64_t pad = (index + k.position) * 0x9e3779b97f4a7c15ULL;
  return Fmix64(Fmix64(word ^ pad) + k.word);
}

// The bytes [8 * index, nbytes) of the last, partial word, zero-padded (little-endian).
KBV_HD inline std::uint64_t TailWord(const unsigned char* bytes, std::size_t count) {
  std::uint64_t word = 0;
  for (std::size_t b = 0; b < count; ++b) word |= static_cast<std::uint64_t>(bytes[b]) << (8 * b);
  return word;
}

// The checksum from the sum of the terms: the length enters too, so buffers that differ only in
// trailing zero bytes differ.
KBV_HD inline std::uint64_t FinishChecksum(std::uint64_t sum, std::size_t nbytes,
                                           const ChecksumKeys& k) {
  return Fmix64(sum + Fmix64(static_cast<std::uint64_t>(nbytes) ^ k.length));
}

// The checksum of host memory.
std::uint64_t ChecksumHost(const void* p, std::size_t nbytes, std::uint64_t key);

struct ChecksumBuffer {
  const void* p;
  std::size_t nbytes;
};

// Of memory on CUDA device `device` (>= 0; the kernel runs on `stream` and is waited for), or of
// host memory (device -1). Throws std::runtime_error for a device in a build without CUDA.
std::uint64_t Checksum(const void* p, std::size_t nbytes, int device, std::uint64_t key,
                       cudaStream_t stream);

// The checksums of several buffers of one device, each as Checksum gives it. On a GPU their
// kernels are all launched before one wait: a model's state is hundreds of tensors, and on a
// device other processes share each wait costs a time slice (DenseNet201's 619 tensors took
// 4-6 s a case in session 27's H100 audit).
std::vector<std::uint64_t> Checksums(const std::vector<ChecksumBuffer>& buffers, int device,
                                     std::uint64_t key, cudaStream_t stream);

}  // namespace kbv::native
