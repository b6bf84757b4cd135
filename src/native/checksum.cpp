#include "native/checksum.h"

#include <cstring>
#include <stdexcept>

#if KBV_NATIVE_CUDA
#include "native/device_measure.h"
#endif

namespace kbv::native {

std::uint64_t ChecksumHost(const void* p, std::size_t nbytes, std::uint64_t key) {
  const ChecksumKeys k = DeriveChecksumKeys(key);
  const auto* bytes = static_cast<const unsigned char*>(p);
  const std::size_t words = nbytes / 8;
  // Four independent sums: the terms are independent, and one chain of additions would leave
  // the multipliers idle.
  std::uint64_t sums[4] = {0, 0, 0, 0};
  std::size_t i = 0;
  for (; i + 4 <= words; i += 4) {
    for (std::size_t lane = 0; lane < 4; ++lane) {
      std::uint64_t word;
      std::memcpy(&word, bytes + 8 * (i + lane), 8);
      sums[lane] += ChecksumTerm(word, i + lane, k);
    }
  }
  for (; i < words; ++i) {
    std::uint64_t word;
    std::memcpy(&word, bytes + 8 * i, 8);
    sums[0] += ChecksumTerm(word, i, k);
  }
  std::uint64_t sum = sums[0] + sums[1] + sums[2] + sums[3];
  if (nbytes % 8 != 0) sum += ChecksumTerm(TailWord(bytes + 8 * words, nbytes % 8), words, k);
  return FinishChecksum(sum, nbytes, k);
}

std::uint64_t Checksum(const void* p, std::size_t nbytes, int device, std::uint64_t key,
                       cudaStream_t stream) {
  return Checksums({{p, nbytes}}, device, key, stream).front();
}

std::vector<std::uint64_t> Checksums(const std::vector<ChecksumBuffer>& buffers, int device,
                                     std::uint64_t key, cudaStream_t stream) {
  if (device < 0) {
    std::vector<std::uint64_t> out;
    out.reserve(buffers.size());
    for (const auto& b : buffers) out.push_back(ChecksumHost(b.p, b.nbytes, key));
    return out;
  }
#if KBV_NATIVE_CUDA
  return ChecksumsDevice(buffers, device, key, stream);
#else
  (void)stream;
  throw std::runtime_error("kbv_native was built without CUDA");
#endif
}

}  // namespace kbv::native
