// SharedArena: one block of memory shared between processes that share no parent mapping (the
// trusted reference worker creates it, the sandboxed candidate worker imports it from a file
// descriptor passed over a socket, across PID and mount namespaces). docs/case-path.md.
//
// Host (device -1): a memfd ("kbv-arena", sealed against resizing so an importer cannot shrink
// it under the creator's mapping), mapped MAP_SHARED. Its pages are shmem: they are freed when
// the last descriptor and the last mapping are gone, so a killed process leaks nothing.
// CUDA device (>= 0): a VMM allocation (cuMemCreate, pinned on that device, exportable as a POSIX
// file descriptor, which unlike legacy cudaIpc handles works across PID namespaces), mapped into
// an address range reserved for it. Both kinds start zeroed.
//
// Not thread-safe: one Python thread uses an arena at a time (the GIL serialises the bindings).
#pragma once

#include <cstddef>
#include <cstdint>

namespace kbv::native {

class SharedArena {
 public:
  // Creates an arena of at least `nbytes` (> 0) bytes on `device`.
  SharedArena(std::size_t nbytes, int device);
  // Imports the arena behind `fd` (from ExportFd); `fd` stays the caller's. The host checks the
  // descriptor holds `nbytes`; a device mapping of more than the allocation fails in the driver.
  static SharedArena Open(int fd, std::size_t nbytes, int device);

  SharedArena(SharedArena&& other) noexcept;
  SharedArena& operator=(SharedArena&&) = delete;
  SharedArena(const SharedArena&) = delete;
  SharedArena& operator=(const SharedArena&) = delete;
  ~SharedArena();

  // The mapping's address (kept after Revoke, where it names the reserved range; 0 once closed).
  std::uintptr_t ptr() const { return reinterpret_cast<std::uintptr_t>(base_); }
  std::size_t nbytes() const { return nbytes_; }
  std::size_t capacity() const { return capacity_; }  // rounded to pages or the VMM granularity
  int device() const { return device_; }
  bool revoked() const { return revoked_; }
  bool closed() const { return closed_; }

  // A new descriptor for the arena, owned (and closed) by the caller, close-on-exec.
  int ExportFd() const;
  // The address of [offset, offset + bytes), after checking it lies within nbytes and the arena
  // is still mapped. Throws std::out_of_range / std::runtime_error.
  void* Slice(std::size_t offset, std::size_t bytes) const;

  // Unmaps the memory now but keeps the address range reserved until the process ends, so that
  // no later arena or allocation gets the same addresses and any later access faults (SIGSEGV on
  // the host, an illegal address on the device). Views become dangling by design. Idempotent.
  void Revoke();
  // Releases everything now (a revoked arena's range stays reserved). Idempotent; the destructor
  // does it too.
  void Close();

 private:
  SharedArena() = default;
  void CreateHost();
  void OpenHost(int fd);
  void CreateDevice();
  void OpenDevice(int fd);
  void ReleaseDevice(bool keep_range);

  void* base_ = nullptr;
  std::size_t nbytes_ = 0, capacity_ = 0;
  int device_ = -1;
  int fd_ = -1;                    // host: a descriptor of the memfd, for ExportFd
  unsigned long long handle_ = 0;  // device: the CUmemGenericAllocationHandle
  bool revoked_ = false, closed_ = false;
};

}  // namespace kbv::native
