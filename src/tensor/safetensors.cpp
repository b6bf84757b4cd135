#include "tensor/safetensors.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <utility>

namespace kbv::tensor {

// The format is little-endian; views reinterpret the bytes in place.
static_assert(std::endian::native == std::endian::little, "kbv reads tensors in place");

namespace {

constexpr std::pair<DType, std::string_view> kSafetensorsNames[] = {
    {DType::F64, "F64"}, {DType::F32, "F32"},   {DType::F16, "F16"}, {DType::BF16, "BF16"},
    {DType::I64, "I64"}, {DType::I32, "I32"},   {DType::I16, "I16"}, {DType::I8, "I8"},
    {DType::U8, "U8"},   {DType::Bool, "BOOL"},
};

template <class T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

[[noreturn]] void fail(const std::filesystem::path& path, std::string_view what) {
  throw FormatError(fmt::format("{}: not a valid safetensors file: {}", path.string(), what));
}

// ---- header parsing -------------------------------------------------------------------------

uint64_t unsigned_field(const std::filesystem::path& path, const std::string& tensor,
                        const nlohmann::json& v, std::string_view field) {
  if (!v.is_number_unsigned()) {
    fail(path, fmt::format("tensor '{}': {} holds {}, not a non-negative integer", tensor, field,
                           v.dump()));
  }
  return v.get<uint64_t>();
}

std::vector<int64_t> parse_shape(const std::filesystem::path& path, const std::string& name,
                                 const nlohmann::json& entry) {
  const auto it = entry.find("shape");
  if (it == entry.end() || !it->is_array()) fail(path, fmt::format("tensor '{}': no shape", name));
  std::vector<int64_t> shape;
  for (const auto& d : *it) {
    const uint64_t dim = unsigned_field(path, name, d, "shape");
    if (dim > static_cast<uint64_t>(INT64_MAX)) fail(path, fmt::format("tensor '{}': huge", name));
    shape.push_back(static_cast<int64_t>(dim));
  }
  return shape;
}

DType parse_dtype(const std::filesystem::path& path, const std::string& name,
                  const nlohmann::json& entry) {
  const auto it = entry.find("dtype");
  if (it == entry.end() || !it->is_string()) fail(path, fmt::format("tensor '{}': no dtype", name));
  const auto dtype = parse_safetensors_dtype(it->get_ref<const std::string&>());
  if (!dtype) {
    fail(path, fmt::format("tensor '{}': unsupported dtype {}", name, it->dump()));
  }
  return *dtype;
}

// Number of bytes a tensor of this shape and dtype occupies, or nullopt on overflow.
std::optional<uint64_t> expected_bytes(const std::vector<int64_t>& shape, DType dtype) {
  uint64_t n = element_size(dtype);
  for (const int64_t d : shape) {
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) return std::nullopt;
  }
  return n;
}

TensorView parse_tensor(const std::filesystem::path& path, const std::string& name,
                        const nlohmann::json& entry, const std::byte* buffer,
                        uint64_t buffer_size) {
  if (!entry.is_object()) fail(path, fmt::format("entry '{}' is not an object", name));
  TensorView view{.name = name,
                  .dtype = parse_dtype(path, name, entry),
                  .shape = parse_shape(path, name, entry)};

  const auto offsets = entry.find("data_offsets");
  if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2) {
    fail(path, fmt::format("tensor '{}': data_offsets must be [begin, end]", name));
  }
  const uint64_t begin = unsigned_field(path, name, (*offsets)[0], "data_offsets");
  const uint64_t end = unsigned_field(path, name, (*offsets)[1], "data_offsets");
  if (begin > end || end > buffer_size) {
    fail(path, fmt::format("tensor '{}': data_offsets [{}, {}] outside the {}-byte buffer", name,
                           begin, end, buffer_size));
  }
  const auto expected = expected_bytes(view.shape, view.dtype);
  if (!expected || *expected != end - begin) {
    fail(path, fmt::format("tensor '{}': {} bytes for shape [{}] of {} (expected {})", name,
                           end - begin, fmt::join(view.shape, ", "), torch_name(view.dtype),
                           expected ? fmt::to_string(*expected) : std::string("an overflow")));
  }
  view.data = buffer + begin;
  view.nbytes = end - begin;
  return view;
}

std::map<std::string, std::string> parse_metadata(const std::filesystem::path& path,
                                                  const nlohmann::json& entry) {
  if (!entry.is_object()) fail(path, "__metadata__ is not an object");
  std::map<std::string, std::string> metadata;
  for (const auto& [key, value] : entry.items()) {
    if (!value.is_string()) fail(path, fmt::format("__metadata__ '{}' is not a string", key));
    metadata.emplace(key, value.get<std::string>());
  }
  return metadata;
}

// Two tensors sharing bytes would let one silently alias another.
void check_no_overlap(const std::filesystem::path& path, std::vector<const TensorView*> views) {
  std::erase_if(views, [](const TensorView* v) { return v->nbytes == 0; });
  std::sort(views.begin(), views.end(),
            [](const TensorView* a, const TensorView* b) { return a->data < b->data; });
  for (size_t i = 1; i < views.size(); ++i) {
    if (views[i]->data < views[i - 1]->data + views[i - 1]->nbytes) {
      fail(path, fmt::format("tensors '{}' and '{}' overlap", views[i - 1]->name, views[i]->name));
    }
  }
}

}  // namespace

// ---- dtypes ---------------------------------------------------------------------------------

std::string_view safetensors_name(DType d) {
  for (const auto& [dtype, name] : kSafetensorsNames) {
    if (dtype == d) return name;
  }
  return "?";
}

std::optional<DType> parse_safetensors_dtype(std::string_view name) {
  for (const auto& [dtype, spelled] : kSafetensorsNames) {
    if (spelled == name) return dtype;
  }
  return std::nullopt;
}

// ---- SafetensorsFile ------------------------------------------------------------------------

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path, bool follow_links) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (follow_links ? 0 : O_NOFOLLOW));
  if (fd < 0) fail(path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail(path, std::strerror(err));
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    fail(path, fmt::format("{} bytes, too short for the 8-byte header length", size));
  }
  SafetensorsFile file;
  file.base_ = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);  // the mapping keeps its own reference to the file
  if (file.base_ == MAP_FAILED) {
    file.base_ = nullptr;
    fail(path, fmt::format("mmap failed: {}", std::strerror(err)));
  }
  file.size_ = size;

  const auto* bytes = static_cast<const std::byte*>(file.base_);
  const auto header_size = load<uint64_t>(bytes);
  if (header_size > size - 8) {
    fail(path,
         fmt::format("header length {} exceeds the {} bytes after it", header_size, size - 8));
  }
  const auto* header_begin = reinterpret_cast<const char*>(bytes + 8);
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(header_begin, header_begin + header_size);
  } catch (const nlohmann::json::exception& e) {
    fail(path, fmt::format("header is not valid JSON ({})", e.what()));
  }
  if (!header.is_object()) fail(path, "header is not a JSON object");

  const std::byte* buffer = bytes + 8 + header_size;
  const uint64_t buffer_size = size - 8 - header_size;
  for (const auto& [key, entry] : header.items()) {
    if (key == "__metadata__") {
      file.metadata_ = parse_metadata(path, entry);
    } else {
      file.tensors_.push_back(parse_tensor(path, key, entry, buffer, buffer_size));
    }
  }
  std::sort(file.tensors_.begin(), file.tensors_.end(),
            [](const TensorView& a, const TensorView& b) { return a.name < b.name; });
  std::vector<const TensorView*> views;
  for (const auto& t : file.tensors_) views.push_back(&t);
  check_no_overlap(path, std::move(views));
  return file;
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      tensors_(std::move(other.tensors_)),
      metadata_(std::move(other.metadata_)) {}

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& other) noexcept {
  if (this != &other) {
    unmap();
    base_ = std::exchange(other.base_, nullptr);
    size_ = std::exchange(other.size_, 0);
    tensors_ = std::move(other.tensors_);
    metadata_ = std::move(other.metadata_);
  }
  return *this;
}

SafetensorsFile::~SafetensorsFile() { unmap(); }

void SafetensorsFile::unmap() noexcept {
  if (base_ != nullptr) ::munmap(base_, size_);
  base_ = nullptr;
  size_ = 0;
}

const TensorView* SafetensorsFile::find(std::string_view name) const {
  const auto it =
      std::lower_bound(tensors_.begin(), tensors_.end(), name,
                       [](const TensorView& t, std::string_view n) { return t.name < n; });
  return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

}  // namespace kbv::tensor
