#include "native/shared_arena.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#if KBV_NATIVE_CUDA
#include "native/cuda_check.h"
#include "native/cuda_driver.h"
#include "native/device_measure.h"
#endif

namespace kbv::native {
namespace {

[[noreturn]] void ThrowErrno(const char* call) {
  throw std::runtime_error(std::string("kbv_native: ") + call + " failed: " + std::strerror(errno));
}

std::size_t RoundUp(std::size_t n, std::size_t granularity) {
  return (n + granularity - 1) / granularity * granularity;
}

std::size_t PageSize() { return static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }

#if KBV_NATIVE_CUDA
CUmemAllocationProp DeviceProp(int device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return prop;
}

std::size_t Granularity(const CUmemAllocationProp& prop) {
  std::size_t granularity = 0;
  CheckDriver(
      Driver().MemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
      "cuMemGetAllocationGranularity");
  return granularity;
}

// Reserves a range for the allocation, maps it there and grants the device read-write access;
// undoes what it did before throwing.
void* MapDevice(CUmemGenericAllocationHandle handle, std::size_t size, std::size_t alignment,
                int device) {
  const CudaDriver& d = Driver();
  CUdeviceptr address = 0;
  CheckDriver(d.MemAddressReserve(&address, size, alignment, 0, 0), "cuMemAddressReserve");
  CUresult status = d.MemMap(address, size, 0, handle, 0);
  const char* failed = "cuMemMap";
  if (status == CUDA_SUCCESS) {
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = device;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    status = d.MemSetAccess(address, size, &access, 1);
    if (status == CUDA_SUCCESS) return reinterpret_cast<void*>(address);
    failed = "cuMemSetAccess";
    d.MemUnmap(address, size);
  }
  d.MemAddressFree(address, size);
  CheckDriver(status, failed);
  return nullptr;
}
#endif

#if !KBV_NATIVE_CUDA
[[noreturn]] void ThrowNoCuda() { throw std::runtime_error("kbv_native was built without CUDA"); }
#endif

}  // namespace

// ---- creation and import --------------------------------------------------------------------

SharedArena::SharedArena(std::size_t nbytes, int device) {
  if (nbytes == 0) throw std::invalid_argument("kbv_native: an arena needs at least one byte");
  nbytes_ = nbytes;
  device_ = device;
  if (device < 0) {
    CreateHost();
  } else {
    CreateDevice();
  }
}

SharedArena SharedArena::Open(int fd, std::size_t nbytes, int device) {
  if (nbytes == 0) throw std::invalid_argument("kbv_native: an arena needs at least one byte");
  if (fd < 0) throw std::invalid_argument("kbv_native: not a file descriptor");
  SharedArena arena;
  arena.nbytes_ = nbytes;
  arena.device_ = device;
  if (device < 0) {
    arena.OpenHost(fd);
  } else {
    arena.OpenDevice(fd);
  }
  return arena;
}

void SharedArena::CreateHost() {
  capacity_ = RoundUp(nbytes_, PageSize());
  fd_ = memfd_create("kbv-arena", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd_ < 0) ThrowErrno("memfd_create");
  // Sealed once sized: an importer (the candidate holds a descriptor) cannot shrink the file
  // under the creator's mapping, which would make the creator's next access a SIGBUS.
  if (ftruncate(fd_, static_cast<off_t>(capacity_)) != 0 ||
      fcntl(fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    const int err = errno;
    close(fd_);
    fd_ = -1;
    errno = err;
    ThrowErrno("sizing the memfd");
  }
  base_ = mmap(nullptr, capacity_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (base_ == MAP_FAILED) {
    const int err = errno;
    base_ = nullptr;
    close(fd_);
    fd_ = -1;
    errno = err;
    ThrowErrno("mmap");
  }
}

void SharedArena::OpenHost(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) ThrowErrno("fstat");
  if (st.st_size < 0 || static_cast<std::size_t>(st.st_size) < nbytes_) {
    throw std::invalid_argument("kbv_native: the descriptor holds " + std::to_string(st.st_size) +
                                " bytes, fewer than the " + std::to_string(nbytes_) + " asked for");
  }
  capacity_ = RoundUp(nbytes_, PageSize());
  fd_ = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (fd_ < 0) ThrowErrno("fcntl(F_DUPFD_CLOEXEC)");
  base_ = mmap(nullptr, capacity_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (base_ == MAP_FAILED) {
    const int err = errno;
    base_ = nullptr;
    close(fd_);
    fd_ = -1;
    errno = err;
    ThrowErrno("mmap");
  }
}

void SharedArena::CreateDevice() {
#if KBV_NATIVE_CUDA
  DeviceGuard guard(device_);
  const CudaDriver& d = Driver();
  const CUmemAllocationProp prop = DeviceProp(device_);
  const std::size_t granularity = Granularity(prop);
  capacity_ = RoundUp(nbytes_, granularity);
  CUmemGenericAllocationHandle handle = 0;
  CheckDriver(d.MemCreate(&handle, capacity_, &prop, 0), "cuMemCreate");
  handle_ = handle;
  try {
    base_ = MapDevice(handle, capacity_, granularity, device_);
    // New physical memory holds whatever its last user left: zero it, as a memfd is.
    KBV_CUDA_CHECK(cudaMemsetAsync(base_, 0, capacity_, nullptr));
    KBV_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  } catch (...) {
    try {
      ReleaseDevice(/*keep_range=*/false);
    } catch (...) {  // the first failure is the one to report
    }
    base_ = nullptr;
    throw;
  }
#else
  ThrowNoCuda();
#endif
}

void SharedArena::OpenDevice(int fd) {
#if KBV_NATIVE_CUDA
  DeviceGuard guard(device_);
  const CudaDriver& d = Driver();
  const std::size_t granularity = Granularity(DeviceProp(device_));
  capacity_ = RoundUp(nbytes_, granularity);
  CUmemGenericAllocationHandle handle = 0;
  // The descriptor is passed by value in the pointer argument, and is not consumed.
  CheckDriver(d.MemImportFromShareableHandle(
                  &handle, reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd)),
                  CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
              "cuMemImportFromShareableHandle");
  handle_ = handle;
  try {
    base_ = MapDevice(handle, capacity_, granularity, device_);
  } catch (...) {
    try {
      ReleaseDevice(/*keep_range=*/false);
    } catch (...) {  // the first failure is the one to report
    }
    base_ = nullptr;
    throw;
  }
#else
  (void)fd;
  ThrowNoCuda();
#endif
}

SharedArena::SharedArena(SharedArena&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)),
      nbytes_(other.nbytes_),
      capacity_(other.capacity_),
      device_(other.device_),
      fd_(std::exchange(other.fd_, -1)),
      handle_(std::exchange(other.handle_, 0)),
      revoked_(other.revoked_),
      closed_(std::exchange(other.closed_, true)) {}

SharedArena::~SharedArena() {
  try {
    Close();
  } catch (...) {  // a destructor cannot report; Close() names the failure when called directly
  }
}

// ---- use ------------------------------------------------------------------------------------

int SharedArena::ExportFd() const {
  if (closed_ || revoked_) {
    throw std::runtime_error(std::string("kbv_native: the arena is ") +
                             (closed_ ? "closed" : "revoked"));
  }
  if (device_ < 0) {
    const int fd = fcntl(fd_, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) ThrowErrno("fcntl(F_DUPFD_CLOEXEC)");
    return fd;
  }
#if KBV_NATIVE_CUDA
  int fd = -1;
  CheckDriver(Driver().MemExportToShareableHandle(&fd, handle_,
                                                  CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
              "cuMemExportToShareableHandle");
  if (fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
    const int err = errno;
    close(fd);
    errno = err;
    ThrowErrno("fcntl(F_SETFD)");
  }
  return fd;
#else
  ThrowNoCuda();
#endif
}

void* SharedArena::Slice(std::size_t offset, std::size_t bytes) const {
  if (closed_ || revoked_) {
    throw std::runtime_error(std::string("kbv_native: the arena is ") +
                             (closed_ ? "closed" : "revoked"));
  }
  if (offset > nbytes_ || bytes > nbytes_ - offset) {
    throw std::out_of_range("kbv_native: bytes [" + std::to_string(offset) + ", " +
                            std::to_string(offset) + " + " + std::to_string(bytes) +
                            ") lie outside the arena's " + std::to_string(nbytes_) + " bytes");
  }
  return static_cast<unsigned char*>(base_) + offset;
}

// ---- revocation and release -----------------------------------------------------------------

void SharedArena::Revoke() {
  if (revoked_ || closed_) return;
  revoked_ = true;
  if (device_ < 0) {
    // The shared pages are replaced by an inaccessible private mapping of the same range: the
    // range stays taken, and the memfd loses this process's references (mapping and descriptor).
    const int err = close(fd_) != 0 ? errno : 0;
    fd_ = -1;
    void* reserved = mmap(base_, capacity_, PROT_NONE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    if (reserved == MAP_FAILED) ThrowErrno("mmap(PROT_NONE)");
    if (err != 0) {
      errno = err;
      ThrowErrno("close");
    }
    return;
  }
#if KBV_NATIVE_CUDA
  DeviceGuard guard(device_);
  ReleaseDevice(/*keep_range=*/true);
#endif
}

void SharedArena::Close() {
  if (closed_) return;
  closed_ = true;
  if (device_ < 0) {
    // A revoked range stays reserved for the life of the process (Revoke's promise).
    if (!revoked_ && base_ != nullptr) munmap(base_, capacity_);
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
    base_ = nullptr;
    return;
  }
#if KBV_NATIVE_CUDA
  DeviceGuard guard(device_);
  // Work already queued on the arena (a comparison pass, a copy) must finish before its memory
  // goes; an error left by a faulted kernel must not stop the release.
  cudaDeviceSynchronize();
  if (!revoked_) ReleaseDevice(/*keep_range=*/false);
  base_ = nullptr;
#endif
}

void SharedArena::ReleaseDevice(bool keep_range) {
#if KBV_NATIVE_CUDA
  // Every step is attempted; the first failure is reported after.
  const CudaDriver& d = Driver();
  CUresult first = CUDA_SUCCESS;
  const char* failed = nullptr;
  const auto note = [&](CUresult status, const char* call) {
    if (status != CUDA_SUCCESS && first == CUDA_SUCCESS) {
      first = status;
      failed = call;
    }
  };
  const auto address = reinterpret_cast<CUdeviceptr>(base_);
  if (base_ != nullptr) {
    note(d.MemUnmap(address, capacity_), "cuMemUnmap");
    if (!keep_range) note(d.MemAddressFree(address, capacity_), "cuMemAddressFree");
  }
  if (handle_ != 0) note(d.MemRelease(handle_), "cuMemRelease");
  handle_ = 0;
  if (failed != nullptr) CheckDriver(first, failed);
#else
  (void)keep_range;
#endif
}

}  // namespace kbv::native
