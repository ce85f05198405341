// safetensors checkpoints: round trips of every dtype and shape, the exact bytes on disk, a file
// built by hand from the specification, corrupt files, and the atomic write.
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <string>

#include "io/safetensors.h"
#include "lockstep.h"
#include "temp_dir.h"

using namespace lockstep;
namespace fs = std::filesystem;

namespace {

// Runs `fn`, expecting a lockstep::Error whose one-line message contains every one of `words`.
template <class Fn>
void expect_error(Fn fn, std::initializer_list<std::string> words) {
  try {
    fn();
    ADD_FAILURE() << "expected an error containing '" << *words.begin() << "'";
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const std::string& w : words) EXPECT_NE(message.find(w), std::string::npos) << "message was: " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << "message was: " << message;
  }
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A safetensors file by hand: the 8-byte little-endian length, the header text, the data.
std::string safetensors_bytes(const std::string& header, const std::string& data) {
  std::string out;
  for (int i = 0; i < 8; ++i) out += static_cast<char>((uint64_t(header.size()) >> (8 * i)) & 0xff);
  return out + header + data;
}

// The raw bytes of a contiguous CPU tensor.
std::string tensor_bytes(const Tensor& t) {
  return std::string(static_cast<const char*>(t.data()), t.numel() * element_size(t.dtype()));
}

// Every test works in a fresh directory of its own, removed afterwards.
using Safetensors = test::TempDirTest;

}  // namespace

TEST_F(Safetensors, RoundTripsEveryDtypeAndShapeBitForBit) {
  const DType dtypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16,
                          DType::i64, DType::i32, DType::u8,  DType::boolean};
  // A scalar, empty tensors (numel 0) and ordinary ones.
  const Shape shapes[] = {{}, {0}, {3}, {2, 0, 3}, {2, 3, 4}};
  StateDict saved;
  for (DType dtype : dtypes) {
    for (const Shape& shape : shapes) {
      std::vector<double> values(shape_numel(shape));
      for (size_t i = 0; i < values.size(); ++i)
        values[i] = is_floating(dtype) ? 0.37 * i - 2.0 : dtype == DType::boolean ? i % 2 : (i * 37) % 11;
      saved.emplace_back(dtype_name(dtype) + "." + shape_str(shape),
                         from_vector(values, shape, TensorOptions().dtype(dtype)));
    }
  }
  save_safetensors(file("all.safetensors"), saved);
  const StateDict loaded = load_safetensors(file("all.safetensors"));

  ASSERT_EQ(loaded.size(), saved.size());
  for (size_t i = 0; i < saved.size(); ++i) {
    SCOPED_TRACE(saved[i].first);
    EXPECT_EQ(loaded[i].first, saved[i].first);  // the state dict's order survives
    EXPECT_EQ(loaded[i].second.dtype(), saved[i].second.dtype());
    EXPECT_EQ(loaded[i].second.shape(), saved[i].second.shape());
    EXPECT_TRUE(loaded[i].second.device().is_cpu());
    EXPECT_EQ(tensor_bytes(loaded[i].second), tensor_bytes(saved[i].second));
  }
}

TEST_F(Safetensors, MetadataRoundTripsAndIsClearedWhenAbsent) {
  const std::map<std::string, std::string> metadata{{"format", "pt"}, {"epoch", "3"}, {"note", "größe: ok"}};
  save_safetensors(file("meta.safetensors"), {{"w", ones({2})}}, metadata);
  std::map<std::string, std::string> read;
  load_safetensors(file("meta.safetensors"), &read);
  EXPECT_EQ(read, metadata);

  save_safetensors(file("plain.safetensors"), {{"w", ones({2})}});
  EXPECT_EQ(read_bytes(file("plain.safetensors")).find("__metadata__"), std::string::npos);
  load_safetensors(file("plain.safetensors"), &read);
  EXPECT_TRUE(read.empty());
}

TEST_F(Safetensors, WritesTheExactBytesOfTheSpecification) {
  save_safetensors(file("tiny.safetensors"),
                   {{"x", from_vector({1.0, -2.0}, {2})}, {"y", from_vector(std::vector<int64_t>{5}, {1}).view({})}},
                   {{"format", "pt"}});
  const std::string bytes = read_bytes(file("tiny.safetensors"));

  // Header: metadata first, then tensors in state-dict order, padded with spaces to 144 = 18*8.
  const std::string json =
      R"({"__metadata__":{"format":"pt"},"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("y":{"dtype":"I64","shape":[],"data_offsets":[8,16]}})";
  ASSERT_EQ(json.size(), 138u);
  const std::string header = json + std::string(6, ' ');
  ASSERT_EQ(bytes.size(), 8u + 144u + 16u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x90\0\0\0\0\0\0\0", 8));  // 144, little-endian
  EXPECT_EQ(bytes.substr(8, 144), header);
  // 1.0f = 0x3F800000 and -2.0f = 0xC0000000, least significant byte first; then int64 5.
  EXPECT_EQ(bytes.substr(152, 8), std::string("\x00\x00\x80\x3f\x00\x00\x00\xc0", 8));
  EXPECT_EQ(bytes.substr(160, 8), std::string("\x05\0\0\0\0\0\0\0", 8));
}

TEST_F(Safetensors, HeaderLengthIsAMultipleOfEight) {
  for (const char* name : {"a", "ab", "abc", "abcd", "abcde", "abcdef", "abcdefg", "abcdefgh"}) {
    save_safetensors(file("pad.safetensors"), {{name, zeros({1})}});
    const std::string bytes = read_bytes(file("pad.safetensors"));
    uint64_t n = 0;
    for (int i = 0; i < 8; ++i) n |= uint64_t(static_cast<unsigned char>(bytes[i])) << (8 * i);
    EXPECT_EQ(n % 8, 0u) << name;
    EXPECT_EQ(bytes.size(), 8 + n + 4) << name;
  }
}

TEST_F(Safetensors, NonContiguousTensorsAreSavedInRowMajorOrder) {
  Tensor x = arange(0, 6).reshape({2, 3});
  save_safetensors(file("views.safetensors"), {{"transposed", x.t()},                      // strides (1, 3)
                                               {"strided", arange(0, 10).slice(0, 1, 10, 3)},  // step 3
                                               {"expanded", from_vector({7, 8}, {2, 1}).expand({2, 3})}});
  const StateDict loaded = load_safetensors(file("views.safetensors"));
  ASSERT_EQ(loaded.size(), 3u);
  EXPECT_EQ(loaded[0].second.shape(), (Shape{3, 2}));
  EXPECT_EQ(loaded[0].second.to_vector<int>(), (std::vector<int>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(loaded[1].second.to_vector<int>(), (std::vector<int>{1, 4, 7}));
  EXPECT_EQ(loaded[2].second.to_vector<int>(), (std::vector<int>{7, 7, 7, 8, 8, 8}));
}

// A file written by hand from the specification, not by save_safetensors: the header lists
// "b" before "a", puts "__metadata__" in the middle and orders an entry's keys differently.
TEST_F(Safetensors, LoadsAFileBuiltByHandFromTheSpecification) {
  const std::string header =
      R"({"b":{"data_offsets":[8,10],"shape":[],"dtype":"BF16"},"__metadata__":{"who":"hand"},)"
      R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"e":{"dtype":"I32","shape":[0],"data_offsets":[10,10]}})"
      "       ";  // 193 + 7 spaces = 200 bytes
  ASSERT_EQ(header.size(), 200u);
  const std::string bytes = std::string("\xc8\0\0\0\0\0\0\0", 8) + header +
                            std::string("\x00\x00\x00\x3f\x00\x00\x40\xc0"  // a = [0.5f, -3.0f]
                                        "\xc0\x3f",                         // b = bf16 1.5 (0x3FC0)
                                        10);
  write_bytes(file("hand.safetensors"), bytes);

  std::map<std::string, std::string> metadata;
  const StateDict loaded = load_safetensors(file("hand.safetensors"), &metadata);
  EXPECT_EQ(metadata, (std::map<std::string, std::string>{{"who", "hand"}}));
  ASSERT_EQ(loaded.size(), 3u);
  // Returned in data order: a at 0, b at 8, e (empty) at 10.
  EXPECT_EQ(loaded[0].first, "a");
  EXPECT_EQ(loaded[0].second.dtype(), DType::f32);
  EXPECT_EQ(loaded[0].second.to_vector<float>(), (std::vector<float>{0.5f, -3.0f}));
  EXPECT_EQ(loaded[1].first, "b");
  EXPECT_EQ(loaded[1].second.dtype(), DType::bf16);
  EXPECT_EQ(loaded[1].second.dim(), 0);
  EXPECT_EQ(loaded[1].second.item(), 1.5);
  EXPECT_EQ(loaded[2].first, "e");
  EXPECT_EQ(loaded[2].second.dtype(), DType::i32);
  EXPECT_EQ(loaded[2].second.shape(), (Shape{0}));
}

TEST_F(Safetensors, CorruptFilesGiveOneLineErrorsNamingTheFileAndTheProblem) {
  const std::string f32x2 = R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::string eight(8, '\0');
  struct Case {
    std::string name, bytes, words;
  };
  const Case cases[] = {
      {"short", std::string(5, '\0'), "5 bytes long, too short"},
      {"long_header", safetensors_bytes("{}", "").substr(0, 8) + "{", "header length is 2 bytes but only 1"},
      {"bad_json", safetensors_bytes(R"({"a": {)", ""), "not valid JSON: [json.exception.parse_error"},
      {"not_object", safetensors_bytes("[1, 2]", ""), "must be a JSON object, got array"},
      // Valid JSON, but a number no double holds: the parser refuses it with an exception of
      // another kind, which once escaped as nlohmann-json's own (found by fuzz_safetensors).
      {"number_beyond_a_double",
       safetensors_bytes(R"({"a":{"dtype":"F32","shape":[1e999],"data_offsets":[0,8]}})", eight),
       "the header holds JSON that cannot be read: [json.exception.out_of_range.406] number overflow parsing '1e999'"},
      {"unknown_dtype", safetensors_bytes(R"({"a":{"dtype":"I8","shape":[8],"data_offsets":[0,8]}})", eight),
       "dtype \"I8\", which Lockstep cannot load"},
      {"missing_field", safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2]}})", eight),
       "must be an object with \"dtype\", \"shape\" and \"data_offsets\""},
      {"negative_dim", safetensors_bytes(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", eight),
       "shape [-2]; expected a list of non-negative integers"},
      {"reversed_offsets", safetensors_bytes(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", eight),
       "expected [begin, end] with begin <= end"},
      {"shape_mismatch", safetensors_bytes(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight),
       "need 12 bytes, but its data_offsets [0,8] span 8 bytes"},
      {"huge_shape",
       safetensors_bytes(R"({"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", eight),
       "which need 2^63 or more bytes"},
      // Dimensions whose product overflows, with a zero among them: still too large.
      {"huge_empty_shape",
       safetensors_bytes(R"({"a":{"dtype":"F32","shape":[9223372036854775807,9223372036854775807,0],)"
                         R"("data_offsets":[0,0]}})", ""),
       "which need 2^63 or more bytes"},
      // Nested JSON within the limit is described, not printed.
      {"nested", safetensors_bytes(R"({"t":)" + std::string(10, '[') + std::string(10, ']') + "}", ""),
       "tensor 't' must be an object with \"dtype\", \"shape\" and \"data_offsets\", got an array of length 1"},
      {"nested_shape",
       safetensors_bytes(R"({"a":{"dtype":"F32","shape":)" + std::string(10, '[') + std::string(10, ']') +
                             R"(,"data_offsets":[0,0]}})", ""),
       "has shape an array of length 1; expected a list of non-negative integers"},
      {"out_of_range", safetensors_bytes(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", eight),
       "reach beyond the data section of 8 bytes"},
      {"overlap",
       safetensors_bytes(R"({"a":)" + f32x2 + R"(,"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                         std::string(12, '\0')),
       "tensor 'b' starts at data offset 4, inside the previous tensor, which ends at 8"},
      {"gap",
       safetensors_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                         R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                         std::string(12, '\0')),
       "leaving a gap of 4 bytes"},
      {"trailing", safetensors_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", eight),
       "the tensors cover 4 bytes of data but the file holds 8"},
      {"duplicate", safetensors_bytes(R"({"a":)" + f32x2 + R"(,"a":)" + f32x2 + "}", eight),
       "names tensor 'a' twice"},
      {"bad_metadata", safetensors_bytes(R"({"__metadata__":{"epoch":3}})", ""),
       "must map strings to strings, but 'epoch' is 3"},
      {"bad_bool", safetensors_bytes(R"({"m":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", "\x01\x07"),
       "holds the byte 7 at element 1"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = file(c.name + ".safetensors");
    write_bytes(path, c.bytes);
    expect_error([&] { load_safetensors(path); }, {"load_safetensors: '" + path + "'", c.words});
  }
  expect_error([&] { load_safetensors(dir()); }, {"load_safetensors: '" + dir() + "' is a folder; name a file"});
  expect_error([&] { load_safetensors(file("missing.safetensors")); },
               {file("missing.safetensors"), "cannot open the file: No such file or directory"});
}

// JSON nested deeper than any safetensors header needs is refused while it is parsed: a
// million levels would otherwise exhaust the stack of whatever walks the parsed value.
TEST_F(Safetensors, RefusesHeadersNestedDeeperThanTheLimit) {
  const auto nested = [](size_t levels) { return std::string(levels, '[') + std::string(levels, ']'); };
  const std::string words = "the header nests JSON more than 64 levels deep, where a safetensors header needs 3";
  for (size_t levels : {100000, 1000000}) {
    SCOPED_TRACE(levels);
    write_bytes(file("deep.safetensors"), safetensors_bytes(R"({"t":)" + nested(levels) + "}", ""));
    expect_error([&] { load_safetensors(file("deep.safetensors")); },
                 {"load_safetensors: '" + file("deep.safetensors") + "'", words});
    write_bytes(file("deep_shape.safetensors"),
                safetensors_bytes(R"({"a":{"dtype":"F32","shape":)" + nested(levels) + R"(,"data_offsets":[0,0]}})",
                                  ""));
    expect_error([&] { load_safetensors(file("deep_shape.safetensors")); }, {words});
  }
  // Exactly at the limit (the header object, a tensor's entry and 62 arrays): the usual error
  // about the shape, not about nesting.
  write_bytes(file("limit.safetensors"),
              safetensors_bytes(R"({"a":{"dtype":"F32","shape":)" + nested(62) + R"(,"data_offsets":[0,0]}})", ""));
  expect_error([&] { load_safetensors(file("limit.safetensors")); }, {"has shape an array of length 1"});
  // Brackets inside strings are text, not nesting.
  save_safetensors(file("brackets.safetensors"), {{std::string(1000, '['), ones({1})}},
                   {{"note", std::string(1000, '{')}});
  EXPECT_EQ(load_safetensors(file("brackets.safetensors"))[0].first, std::string(1000, '['));
}

// A checkpoint saved by a run that had diverged holds infinities or NaNs: loading it is an
// error naming the tensor, in every floating dtype.
TEST_F(Safetensors, RefusesNonFiniteValuesNamingTheTensor) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  struct Case {
    DType dtype;
    std::vector<double> values;
    std::string words;
  };
  const Case cases[] = {
      {DType::f32, {1, 2, 3, inf}, "tensor 'fc.weight' (F32, shape [2, 2]) holds 1 non-finite value, the first inf at "
                                   "element 3; the run that saved it had diverged: load an earlier checkpoint"},
      {DType::f32, {nan, 0, nan, 1}, "tensor 'fc.weight' (F32, shape [2, 2]) holds 2 non-finite values, the first nan "
                                     "at element 0"},
      {DType::bf16, {0, -inf, 1, 1}, "tensor 'fc.weight' (BF16, shape [2, 2]) holds 1 non-finite value, the first "
                                     "-inf at element 1"},
      {DType::bf16, {0, 1, 2, nan}, "(BF16, shape [2, 2]) holds 1 non-finite value, the first nan at element 3"},
      {DType::f16, {inf, 0, 0, 0}, "(F16, shape [2, 2]) holds 1 non-finite value, the first inf at element 0"},
      {DType::f64, {0, 0, nan, 0}, "(F64, shape [2, 2]) holds 1 non-finite value, the first nan at element 2"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.words);
    const std::string path = file("diverged.safetensors");
    // save_safetensors writes such values: the file stays readable by other tools.
    save_safetensors(path, {{"fc.bias", zeros({2})},
                            {"fc.weight", from_vector(c.values, {2, 2}, TensorOptions().dtype(c.dtype))}});
    expect_error([&] { load_safetensors(path); }, {"load_safetensors: '" + path + "'", c.words});
  }
  // The largest finite values and integers whose bits would spell inf or NaN as floats load.
  const float big = std::numeric_limits<float>::max();
  save_safetensors(file("finite.safetensors"),
                   {{"max", from_vector({-big, big}, {2})},
                    {"bf16", from_vector({3.0e38, -3.0e38}, {2}, TensorOptions().dtype(DType::bf16))},
                    {"f16", from_vector({65504.0, -65504.0}, {2}, TensorOptions().dtype(DType::f16))},
                    {"ints", from_vector(std::vector<int32_t>{-1, 0x7f800000}, {2})}});
  EXPECT_EQ(load_safetensors(file("finite.safetensors")).size(), 4u);
}

TEST_F(Safetensors, SaveRejectsBadStateDicts) {
  expect_error([&] { save_safetensors(file("x.safetensors"), {{"w", ones({1})}, {"w", ones({2})}}); },
               {"save_safetensors", "two tensors named 'w'"});
  expect_error([&] { save_safetensors(file("x.safetensors"), {{"__metadata__", ones({1})}}); },
               {"save_safetensors", "'__metadata__' is reserved"});
  expect_error([&] { save_safetensors(file("x.safetensors"), {{"w", Tensor()}}); },
               {"save_safetensors", "tensor 'w' is undefined"});
  EXPECT_TRUE(fs::is_empty(dir()));  // bad input never creates a file
}

TEST_F(Safetensors, SaveRejectsTensorsOffTheCpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  expect_error([&] { save_safetensors(file("x.safetensors"), {{"w", ones({2}).to(Device::cuda(0))}}); },
               {"tensor 'w' is on cuda:0; move it to the CPU first"});
  EXPECT_TRUE(fs::is_empty(dir()));
}

TEST_F(Safetensors, WritesAtomicallyAndReplacesOnlyOnSuccess) {
  const std::string path = file("model.safetensors");
  save_safetensors(path, {{"w", zeros({2})}});
  save_safetensors(path, {{"w", ones({3})}});  // replaces the old file
  EXPECT_EQ(load_safetensors(path)[0].second.to_vector<float>(), (std::vector<float>{1, 1, 1}));
  EXPECT_FALSE(fs::exists(path + ".tmp"));

  // A failed save leaves the previous checkpoint byte for byte.
  const std::string before = read_bytes(path);
  EXPECT_THROW(save_safetensors(path, {{"w", ones({1})}, {"w", ones({1})}}), Error);
  EXPECT_EQ(read_bytes(path), before);

  // The temporary file cannot be created: the error names it and the reason; the old file stays
  // and the directory in the way is not touched.
  fs::create_directory(path + ".tmp");
  expect_error([&] { save_safetensors(path, {{"w", zeros({1})}}); },
               {"cannot create '" + path + ".tmp'", "Is a directory"});
  EXPECT_EQ(read_bytes(path), before);
  EXPECT_TRUE(fs::is_directory(path + ".tmp"));
  fs::remove(path + ".tmp");

  // A directory that does not exist: a clear error and nothing written anywhere.
  const std::string nowhere = file("no_such_dir/model.safetensors");
  expect_error([&] { save_safetensors(nowhere, {{"w", zeros({1})}}); },
               {"cannot create '" + nowhere + ".tmp'", "No such file or directory"});
  EXPECT_FALSE(fs::exists(file("no_such_dir")));

  // The rename fails (a non-empty folder took the target's name after the checks): the written
  // .tmp is removed again.
  const std::string occupied = file("occupied");
  detail::set_save_before_rename_hook(
      [&](const std::string&) { fs::create_directories(fs::path(occupied) / "inside"); });
  expect_error([&] { save_safetensors(occupied, {{"w", zeros({1})}}); },
               {"cannot rename '" + occupied + ".tmp' to '" + occupied + "'"});
  detail::set_save_before_rename_hook({});
  EXPECT_FALSE(fs::exists(occupied + ".tmp"));
  EXPECT_TRUE(fs::is_directory(fs::path(occupied) / "inside"));
}

// A save writes through a symbolic link, as torch.save does: the link stays a link (relative
// to its own folder, wherever the program runs) and its target holds the new tensors.
TEST_F(Safetensors, SavesThroughASymbolicLinkToItsTarget) {
  fs::create_directories(file("runs"));
  fs::create_directories(file("links"));
  save_safetensors(file("runs/model.safetensors"), {{"w", zeros({2})}});
  fs::create_symlink("../runs/model.safetensors", file("links/latest.safetensors"));

  save_safetensors(file("links/latest.safetensors"), {{"w", ones({3})}});
  EXPECT_TRUE(fs::is_symlink(file("links/latest.safetensors")));
  EXPECT_EQ(fs::read_symlink(file("links/latest.safetensors")), "../runs/model.safetensors");
  EXPECT_EQ(load_safetensors(file("runs/model.safetensors"))[0].second.to_vector<float>(),
            (std::vector<float>{1, 1, 1}));
  // No stray temporary beside the link or its target.
  EXPECT_EQ(std::distance(fs::directory_iterator(file("links")), {}), 1);
  EXPECT_EQ(std::distance(fs::directory_iterator(file("runs")), {}), 1);

  // A dangling link: its target is created, and the link now leads to the tensors.
  fs::create_symlink("../runs/new.safetensors", file("links/next.safetensors"));
  save_safetensors(file("links/next.safetensors"), {{"w", ones({1})}});
  EXPECT_TRUE(fs::is_symlink(file("links/next.safetensors")));
  EXPECT_TRUE(fs::is_regular_file(file("runs/new.safetensors")));
  EXPECT_EQ(load_safetensors(file("links/next.safetensors"))[0].second.to_vector<float>(), (std::vector<float>{1}));
}

// A save that replaces a file keeps its permissions (a new file gets the umask's).
TEST_F(Safetensors, AReplacedFileKeepsItsPermissions) {
  save_safetensors(file("model.safetensors"), {{"w", zeros({2})}});
  fs::permissions(file("model.safetensors"), fs::perms::owner_read | fs::perms::owner_write);
  save_safetensors(file("model.safetensors"), {{"w", ones({2})}});
  EXPECT_EQ(fs::status(file("model.safetensors")).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(load_safetensors(file("model.safetensors"))[0].second.to_vector<float>(), (std::vector<float>{1, 1}));
}

// A target that is not a regular file is refused before anything is written: a device node, a
// FIFO (whose open would block) or a link to one is never replaced by a file.
TEST_F(Safetensors, RefusesToReplaceADeviceOrAFifo) {
  const StateDict tensors = {{"w", ones({2})}};
  // A node like /dev/null of the test's own where the system lets it make one (as root), so that
  // a save that wrongly replaced it would not replace the machine's; else /dev/null itself, which
  // a user who cannot make nodes cannot replace either.
  const std::string null = mknod(file("null").c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0 ? file("null") : "/dev/null";
  expect_error([&] { save_safetensors(null, tensors); },
               {"save_safetensors: '" + null + "' is a character device; name a regular file"});
  EXPECT_TRUE(fs::is_character_file(null));
  EXPECT_FALSE(fs::exists(null + ".tmp"));

  const std::string fifo = file("pipe");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  alarm(20);  // a save or load that blocks on the FIFO ends the test run instead of hanging it
  expect_error([&] { save_safetensors(fifo, tensors); },
               {"save_safetensors: '" + fifo + "' is a FIFO (named pipe); name a regular file"});
  expect_error([&] { load_safetensors(fifo); },
               {"load_safetensors: '" + fifo + "' is a FIFO (named pipe); name a regular file"});
  alarm(0);
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_FALSE(fs::exists(fifo + ".tmp"));

  fs::create_symlink(null, file("null-link"));
  expect_error([&] { save_safetensors(file("null-link"), tensors); },
               {"save_safetensors: '" + file("null-link") + "' is a character device"});
  EXPECT_TRUE(fs::is_symlink(file("null-link")));
  EXPECT_TRUE(fs::is_character_file(null));

  const std::string folder = file("folder");
  fs::create_directory(folder);
  expect_error([&] { save_safetensors(folder, tensors); },
               {"save_safetensors: '" + folder + "' is a folder; name a file"});
  EXPECT_TRUE(fs::is_empty(folder));
}
