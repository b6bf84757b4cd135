// Reading safetensors files: every dtype, exact fp16/bf16 decoding, and every malformed input
// rejected with a FormatError that names the defect. Files are built byte by byte here, as
// safetensors.torch.save_file lays them out.

#include "tensor/safetensors.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

namespace kbv::tensor {
namespace {

using Bytes = std::vector<std::byte>;

template <class T>
Bytes bytes_of(const std::vector<T>& values) {
  Bytes out(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// header length (u64 LE) + header + buffer
Bytes file_bytes(const std::string& header, const Bytes& buffer) {
  Bytes out(8);
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  for (const char c : header) out.push_back(static_cast<std::byte>(c));
  out.insert(out.end(), buffer.begin(), buffer.end());
  return out;
}

class SafetensorsTest : public ::testing::Test {
 protected:
  std::filesystem::path write(const Bytes& bytes) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    const auto path =
        std::filesystem::path(::testing::TempDir()) /
        (std::string("kbv_") + info->name() + std::to_string(counter_++) + ".safetensors");
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    written_.push_back(path);
    return path;
  }
  void TearDown() override {
    for (const auto& p : written_) std::filesystem::remove(p);
  }

  // A file with the given tensors laid out back to back, in the order given.
  struct Entry {
    std::string name, dtype;
    std::vector<int64_t> shape;
    Bytes data;
  };
  std::filesystem::path write_tensors(const std::vector<Entry>& entries,
                                      const nlohmann::json& metadata = nullptr) {
    nlohmann::json header = nlohmann::json::object();
    Bytes buffer;
    for (const auto& e : entries) {
      header[e.name] = {{"dtype", e.dtype},
                        {"shape", e.shape},
                        {"data_offsets", {buffer.size(), buffer.size() + e.data.size()}}};
      buffer.insert(buffer.end(), e.data.begin(), e.data.end());
    }
    if (!metadata.is_null()) header["__metadata__"] = metadata;
    return write(file_bytes(header.dump(), buffer));
  }

  void expect_format_error(const Bytes& bytes, const std::string& fragment) {
    const auto path = write(bytes);
    try {
      SafetensorsFile::open(path);
      ADD_FAILURE() << "no FormatError; expected one mentioning '" << fragment << "'";
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
    }
  }
  void expect_format_error(const std::string& header, const Bytes& buffer,
                           const std::string& fragment) {
    expect_format_error(file_bytes(header, buffer), fragment);
  }

 private:
  int counter_ = 0;
  std::vector<std::filesystem::path> written_;
};

TEST_F(SafetensorsTest, ReadsEveryDtype) {
  const auto path = write_tensors(
      {
          {"f64", "F64", {2}, bytes_of<double>({1.5, -1e300})},
          {"f32", "F32", {2, 2}, bytes_of<float>({1, -2, 0.25f, 3e38f})},
          {"f16", "F16", {2}, bytes_of<uint16_t>({0x3C00, 0xC000})},
          {"bf16", "BF16", {2}, bytes_of<uint16_t>({0x3F80, 0xC040})},
          {"i64", "I64", {2}, bytes_of<int64_t>({-7, int64_t(1) << 50})},
          {"i32", "I32", {1}, bytes_of<int32_t>({-2147483647})},
          {"i16", "I16", {1}, bytes_of<int16_t>({-300})},
          {"i8", "I8", {2}, bytes_of<int8_t>({-128, 127})},
          {"u8", "U8", {2}, bytes_of<uint8_t>({0, 255})},
          {"bool", "BOOL", {3}, bytes_of<uint8_t>({1, 0, 1})},
      },
      {{"format", "pt"}});
  const auto file = SafetensorsFile::open(path);
  ASSERT_EQ(file.tensors().size(), 10u);
  EXPECT_EQ(file.metadata().at("format"), "pt");

  struct Expected {
    std::string name;
    DType dtype;
    std::string_view torch;
    size_t size;
    bool floating;
    std::vector<double> values;
  };
  const std::vector<Expected> expected = {
      {"f64", DType::F64, "float64", 8, true, {1.5, -1e300}},
      {"f32", DType::F32, "float32", 4, true, {1, -2, 0.25, double(3e38f)}},
      {"f16", DType::F16, "float16", 2, true, {1, -2}},
      {"bf16", DType::BF16, "bfloat16", 2, true, {1, -3}},
      {"i64", DType::I64, "int64", 8, false, {-7, double(int64_t(1) << 50)}},
      {"i32", DType::I32, "int32", 4, false, {-2147483647}},
      {"i16", DType::I16, "int16", 2, false, {-300}},
      {"i8", DType::I8, "int8", 1, false, {-128, 127}},
      {"u8", DType::U8, "uint8", 1, false, {0, 255}},
      {"bool", DType::Bool, "bool", 1, false, {1, 0, 1}},
  };
  for (const auto& e : expected) {
    SCOPED_TRACE(e.name);
    const TensorView* t = file.find(e.name);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->dtype, e.dtype);
    EXPECT_EQ(torch_name(t->dtype), e.torch);
    EXPECT_EQ(element_size(t->dtype), e.size);
    EXPECT_EQ(is_floating(t->dtype), e.floating);
    ASSERT_EQ(t->numel(), int64_t(e.values.size()));
    EXPECT_EQ(t->nbytes, e.values.size() * e.size);
    for (size_t i = 0; i < e.values.size(); ++i) EXPECT_EQ(t->value_at(int64_t(i)), e.values[i]);
  }
  EXPECT_EQ(file.find("f32")->shape, (std::vector<int64_t>{2, 2}));
}

TEST_F(SafetensorsTest, SortsByNameAndFinds) {
  const auto path = write_tensors({{"zeta", "F32", {1}, bytes_of<float>({1})},
                                   {"alpha", "F32", {1}, bytes_of<float>({2})},
                                   {"mid", "F32", {1}, bytes_of<float>({3})}});
  const auto file = SafetensorsFile::open(path);
  ASSERT_EQ(file.tensors().size(), 3u);
  EXPECT_EQ(file.tensors()[0].name, "alpha");
  EXPECT_EQ(file.tensors()[1].name, "mid");
  EXPECT_EQ(file.tensors()[2].name, "zeta");
  EXPECT_EQ(file.find("zeta")->value_at(0), 1.0);
  EXPECT_EQ(file.find("nope"), nullptr);
  EXPECT_EQ(file.find(""), nullptr);
  EXPECT_TRUE(file.metadata().empty());
}

TEST_F(SafetensorsTest, ScalarsEmptyTensorsAndEmptyFiles) {
  const auto path = write_tensors(
      {{"scalar", "F64", {}, bytes_of<double>({4.0})}, {"empty", "F32", {0, 3}, Bytes{}}});
  const auto file = SafetensorsFile::open(path);
  EXPECT_EQ(file.find("scalar")->numel(), 1);
  EXPECT_EQ(file.find("scalar")->value_at(0), 4.0);
  EXPECT_EQ(file.find("empty")->numel(), 0);
  EXPECT_EQ(file.find("empty")->nbytes, 0u);

  // safetensors writes "{}" for no tensors at all.
  EXPECT_TRUE(SafetensorsFile::open(write(file_bytes("{}", {}))).tensors().empty());
}

TEST_F(SafetensorsTest, AcceptsHeaderPaddingLikeTheWriter) {
  // The Python writer pads the header with spaces to an 8-byte boundary.
  const std::string header =
      R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})" + std::string(5, ' ');
  const auto file = SafetensorsFile::open(write(file_bytes(header, bytes_of<float>({7}))));
  EXPECT_EQ(file.find("x")->value_at(0), 7.0);
}

TEST_F(SafetensorsTest, MoveKeepsViewsValid) {
  const auto path = write_tensors({{"x", "F32", {3}, bytes_of<float>({1, 2, 3})}});
  auto first = SafetensorsFile::open(path);
  const std::byte* data = first.find("x")->data;
  SafetensorsFile second = std::move(first);
  EXPECT_EQ(second.find("x")->data, data);
  EXPECT_EQ(second.find("x")->value_at(2), 3.0);
  auto third = SafetensorsFile::open(path);
  third = std::move(second);
  EXPECT_EQ(third.find("x")->value_at(1), 2.0);
}

TEST_F(SafetensorsTest, DecodesBlocksAndChecksRange) {
  const auto path =
      write_tensors({{"x", "F16", {4}, bytes_of<uint16_t>({0x3C00, 0x4000, 0x4200, 0x4400})}});
  const auto file = SafetensorsFile::open(path);
  std::vector<double> out(3);
  file.find("x")->decode(1, out);
  EXPECT_EQ(out, (std::vector<double>{2, 3, 4}));
  EXPECT_THROW(file.find("x")->decode(2, out), std::out_of_range);
  EXPECT_THROW(file.find("x")->value_at(-1), std::out_of_range);
}

TEST(HalfDecode, Float16IsExact) {
  EXPECT_EQ(half_to_float(0x3C00), 1.0f);
  EXPECT_EQ(half_to_float(0xC000), -2.0f);
  EXPECT_EQ(half_to_float(0x3555), 0.333251953125f);
  EXPECT_EQ(half_to_float(0x7BFF), 65504.0f);                       // largest finite
  EXPECT_EQ(half_to_float(0x0400), std::ldexp(1.0f, -14));          // smallest normal
  EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24));          // smallest subnormal
  EXPECT_EQ(half_to_float(0x83FF), -1023 * std::ldexp(1.0f, -24));  // largest subnormal
  EXPECT_EQ(half_to_float(0x0000), 0.0f);
  EXPECT_TRUE(std::signbit(half_to_float(0x8000)));
  EXPECT_EQ(half_to_float(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(half_to_float(0xFC00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(half_to_float(0x7E00)));
  EXPECT_TRUE(std::isnan(half_to_float(0xFC01)));
}

TEST(HalfDecode, BFloat16IsExact) {
  EXPECT_EQ(bfloat16_to_float(0x3F80), 1.0f);
  EXPECT_EQ(bfloat16_to_float(0x4049), 3.140625f);
  EXPECT_EQ(bfloat16_to_float(0xC2F7), -123.5f);
  EXPECT_EQ(bfloat16_to_float(0x7F7F), std::ldexp(255.0f, 120));  // largest finite
  EXPECT_EQ(bfloat16_to_float(0x0001), std::ldexp(1.0f, -133));   // smallest subnormal
  EXPECT_EQ(bfloat16_to_float(0xFF80), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(bfloat16_to_float(0x7FC0)));
}

TEST(DTypeNames, RoundTrip) {
  for (const DType d : {DType::F64, DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32,
                        DType::I16, DType::I8, DType::U8, DType::Bool}) {
    EXPECT_EQ(parse_safetensors_dtype(safetensors_name(d)), d);
  }
  EXPECT_FALSE(parse_safetensors_dtype("F8_E4M3").has_value());
}

TEST_F(SafetensorsTest, RejectsMissingFile) {
  EXPECT_THROW(SafetensorsFile::open("/nonexistent/kbv.safetensors"), FormatError);
}

TEST_F(SafetensorsTest, RejectsShortFile) {
  expect_format_error(Bytes(3), "too short");
  expect_format_error(Bytes{}, "too short");
}

TEST_F(SafetensorsTest, RejectsHeaderLengthBeyondFile) {
  Bytes bytes = file_bytes("{}", {});
  const uint64_t n = 1000;
  std::memcpy(bytes.data(), &n, 8);
  expect_format_error(bytes, "header length 1000");
}

TEST_F(SafetensorsTest, RejectsBadJson) {
  expect_format_error(R"({"x": {"dtype": )", {}, "not valid JSON");
  expect_format_error(R"([1, 2])", {}, "not a JSON object");
  expect_format_error(R"({"x": 3})", {}, "not an object");
}

TEST_F(SafetensorsTest, RejectsUnknownDtype) {
  expect_format_error(R"({"x":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}})", Bytes(1),
                      "unsupported dtype \"F8_E4M3\"");
  expect_format_error(R"({"x":{"shape":[1],"data_offsets":[0,1]}})", Bytes(1), "no dtype");
}

TEST_F(SafetensorsTest, RejectsBadShape) {
  expect_format_error(R"({"x":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}})", Bytes(1),
                      "shape holds -1");
  expect_format_error(R"({"x":{"dtype":"U8","shape":[1.5],"data_offsets":[0,1]}})", Bytes(1),
                      "shape holds 1.5");
  expect_format_error(R"({"x":{"dtype":"U8","data_offsets":[0,1]}})", Bytes(1), "no shape");
}

TEST_F(SafetensorsTest, RejectsOffsetsOutOfRange) {
  expect_format_error(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", Bytes(4),
                      "outside the 4-byte buffer");
  expect_format_error(R"({"x":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}})", Bytes(4),
                      "outside");
  expect_format_error(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", Bytes(4),
                      "data_offsets must be [begin, end]");
}

TEST_F(SafetensorsTest, RejectsSizeNotMatchingShape) {
  expect_format_error(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", Bytes(8),
                      "8 bytes for shape [3] of float32 (expected 12)");
  expect_format_error(
      R"({"x":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", Bytes(8),
      "expected an overflow");
}

TEST_F(SafetensorsTest, RejectsOverlappingTensors) {
  expect_format_error(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                      R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                      Bytes(8), "'a' and 'b' overlap");
}

TEST_F(SafetensorsTest, RejectsBadMetadata) {
  expect_format_error(R"({"__metadata__":{"k":1}})", {}, "__metadata__ 'k' is not a string");
  expect_format_error(R"({"__metadata__":[]})", {}, "__metadata__ is not an object");
}

}  // namespace
}  // namespace kbv::tensor
