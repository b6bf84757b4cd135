#pragma once

// Read-only access to tensors saved by Python's `safetensors.torch.save_file`: golden outputs,
// float64 truths and candidate outputs travel between the worker and the engine in this format.
// Files can be gigabytes, so they are memory-mapped and exposed as non-owning views, never copied.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/dtype.hpp"
#include "tensor/view.hpp"

namespace kbv::tensor {

// Any file that is not a well-formed safetensors file (or cannot be read at all).
class FormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "F32", "I64", "BOOL", ... as the safetensors header spells them.
std::string_view safetensors_name(DType);
std::optional<DType> parse_safetensors_dtype(std::string_view);

// A memory-mapped safetensors file. The views stay valid for the lifetime of the object (moving
// it keeps the mapping in place).
class SafetensorsFile {
 public:
  // Throws FormatError with a message naming the file and the defect. follow_links = false:
  // a symbolic link is refused (O_NOFOLLOW), for files an untrusted process could replace.
  static SafetensorsFile open(const std::filesystem::path& path, bool follow_links = true);

  SafetensorsFile(SafetensorsFile&& other) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&& other) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  ~SafetensorsFile();

  // Sorted by name.
  const std::vector<TensorView>& tensors() const { return tensors_; }
  const TensorView* find(std::string_view name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  void unmap() noexcept;

  void* base_ = nullptr;
  size_t size_ = 0;
  std::vector<TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace kbv::tensor
