#include "native/allocation_source.h"

namespace kbv::native {
namespace {

bool Contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

}  // namespace

std::string_view PathBasename(std::string_view path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::string ClassifyAllocationSource(const std::string& path) {
  if (path.empty()) return "unknown";
  const std::string base(PathBasename(path));
  // Order matters: libtorch_nvshmem before nvshmem, libcublasLt is cuBLAS.
  if (Contains(base, "libc10") || Contains(base, "libtorch")) return "torch";
  if (Contains(base, "libcublas")) return "cublas";
  if (Contains(base, "libcudnn")) return "cudnn";
  if (Contains(base, "libcufft")) return "cufft";
  if (Contains(base, "libcusparse")) return "cusparse";
  if (Contains(base, "libcusolver")) return "cusolver";
  if (Contains(base, "libcurand")) return "curand";
  if (Contains(base, "libnccl")) return "nccl";
  if (Contains(base, "nvshmem")) return "nvshmem";
  if (Contains(base, "libcudart")) return "cudart";
  if (Contains(base, "libcupti")) return "cupti";
  if (base.rfind("libcuda.so", 0) == 0) return "driver";
  if (Contains(base, "triton") || Contains(path, "/triton/")) return "triton";
  if (Contains(base, "kbv_native")) return "kbv_native";
  // The driver or runtime called from Python through ctypes: the candidate's own code.
  if (Contains(base, "libffi") || base.rfind("_ctypes", 0) == 0) return "ctypes";
  if (Contains(base, ".so")) return "ext:" + base;
  return "other:" + base;
}

}  // namespace kbv::native
