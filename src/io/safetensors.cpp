#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iterator>
#include <limits>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "util/regular_file.h"

// The format stores little-endian bytes, and tensors are written and read with memcpy-style
// block copies; that is only correct on a little-endian machine (x86-64 and ARM64 are).
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors I/O assumes a little-endian host");

namespace lockstep {
namespace {

// ordered_json keeps keys in insertion order, so the header lists tensors in state-dict order.
using Json = nlohmann::ordered_json;

// The header key reserved for the string-to-string metadata map.
const char* const kMetadataKey = "__metadata__";

// The format's dtype names, in the order error messages list them.
const std::pair<DType, const char*> kDTypeNames[] = {
    {DType::f64, "F64"}, {DType::f32, "F32"}, {DType::f16, "F16"}, {DType::bf16, "BF16"},
    {DType::i64, "I64"}, {DType::i32, "I32"}, {DType::u8, "U8"},   {DType::boolean, "BOOL"},
};

const char* safetensors_dtype_name(DType dtype) {
  for (const auto& [d, name] : kDTypeNames)
    if (d == dtype) return name;
  LOCKSTEP_FAIL("save_safetensors: no safetensors name for dtype ", dtype_name(dtype));
}

// ---------------------------------------------------------------------------------------------
// Saving

// detail::set_save_before_rename_hook's hook (tests only).
std::function<void(const std::string&)>& before_rename_hook() {
  static std::function<void(const std::string&)> hook;
  return hook;
}

// The folder that holds `path` ("." for a bare file name).
std::string folder_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// A file written beside the file that `path` finally names, under that name + ".tmp", which
// replaces it only when commit() succeeds. The final name is found through symbolic links
// (final_link_target), as torch.save's open() writes through them: a link stays a link and
// points at the new contents, where renaming over the link itself would replace it with a
// regular file and leave its target old. If anything throws before commit(), the destructor
// closes and deletes the temporary file, so a failed save leaves the old checkpoint (if any)
// untouched and no debris beside it.
class AtomicFile {
 public:
  explicit AtomicFile(const std::string& path)
      : target_(final_link_target("save_safetensors", path)), tmp_(target_ + ".tmp") {
    // A device node, FIFO, socket or folder is never replaced: refused before anything is written.
    check_regular_if_exists("save_safetensors", path);
    // A temporary left by a save that was killed goes first, whatever it is (unlink never removes
    // a folder), so that the new one is a file of its own, never written through a link.
    const bool cleared = ::unlink(tmp_.c_str()) == 0 || errno == ENOENT;
    if (cleared) file_ = fopen_regular_file("save_safetensors", tmp_, "wb");
    LOCKSTEP_CHECK(file_ != nullptr, "save_safetensors: cannot create '", tmp_, "' (to be renamed to '", target_,
                   "'): ", std::strerror(errno));
    // The file it replaces keeps its permissions, as a file overwritten in place would: a
    // checkpoint its owner made private stays private.
    struct stat existing {};
    if (::stat(target_.c_str(), &existing) == 0) {
      LOCKSTEP_CHECK(::fchmod(::fileno(file_.get()), existing.st_mode & 07777) == 0, "save_safetensors: cannot give '",
                     tmp_, "' the permissions of '", target_, "': ", std::strerror(errno));
    }
  }
  ~AtomicFile() {
    if (!committed_) std::remove(tmp_.c_str());
  }
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t nbytes) {
    if (nbytes == 0) return;
    LOCKSTEP_CHECK(std::fwrite(data, 1, nbytes, file_.get()) == nbytes, "save_safetensors: cannot write to '", tmp_,
                   "': ", std::strerror(errno));
  }

  // Why this order: a crash mid-write must never leave a half-written checkpoint under the
  // real name. The data first reaches the disk (fflush empties the C library's buffer into the
  // kernel, fsync pushes the kernel's copy to the device); only then does rename() swap the
  // name over, and POSIX makes rename atomic: `target` is the old file or the new one.
  void commit() {
    LOCKSTEP_CHECK(std::fflush(file_.get()) == 0, "save_safetensors: cannot write to '", tmp_, "': ",
                   std::strerror(errno));
    LOCKSTEP_CHECK(::fsync(::fileno(file_.get())) == 0, "save_safetensors: cannot flush '", tmp_, "' to disk: ",
                   std::strerror(errno));
    FILE* file = file_.release();
    LOCKSTEP_CHECK(std::fclose(file) == 0, "save_safetensors: cannot close '", tmp_, "': ", std::strerror(errno));
    if (before_rename_hook()) before_rename_hook()(tmp_);
    LOCKSTEP_CHECK(std::rename(tmp_.c_str(), target_.c_str()) == 0, "save_safetensors: cannot rename '", tmp_,
                   "' to '", target_, "': ", std::strerror(errno));
    committed_ = true;
    // The rename changed the folder, whose entry lives in the folder's own blocks: until they
    // reach the disk, a power cut may bring back the old name (or none). fsync the folder.
    const std::string folder = folder_of(target_);
    const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY);
    LOCKSTEP_CHECK(fd >= 0, "save_safetensors: saved '", target_, "' but cannot open its folder '", folder,
                   "' to flush the rename to disk: ", std::strerror(errno));
    const int synced = ::fsync(fd);
    const int error = errno;
    ::close(fd);
    LOCKSTEP_CHECK(synced == 0, "save_safetensors: saved '", target_, "' but cannot flush its folder '", folder,
                   "' to disk: ", std::strerror(error));
  }

 private:
  std::string target_;
  std::string tmp_;
  UniqueFile file_;
  bool committed_ = false;
};

// ---------------------------------------------------------------------------------------------
// Loading

// Throws "load_safetensors: '<path>': <problem>" unless `cond` holds.
template <class... Args>
void check_file(bool cond, const std::string& path, const Args&... problem) {
  LOCKSTEP_CHECK(cond, "load_safetensors: '", path, "': ", problem...);
}

// One tensor's header entry, checked against itself and the size of the data section.
struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin;  // byte range [begin, end) within the data section
  uint64_t end;
};

// A JSON value for an error message: a short flat one as it is written, anything else by its
// kind and size (printed whole it could fill the screen).
std::string describe(const Json& value) {
  constexpr size_t kShort = 80;
  const bool flat = !value.is_structured() ||
                    std::none_of(value.begin(), value.end(), [](const Json& item) { return item.is_structured(); });
  if (flat && value.size() <= kShort) {
    std::string text = value.dump();
    if (text.size() <= kShort) return text;
  }
  if (value.is_array()) return detail::concat("an array of length ", value.size());
  if (value.is_object()) return detail::concat("an object with ", value.size(), " keys");
  return detail::concat("a ", value.type_name(), " too long to print");
}

Entry parse_entry(const std::string& path, const std::string& name, const Json& info, uint64_t data_size) {
  check_file(info.is_object() && info.contains("dtype") && info.contains("shape") && info.contains("data_offsets"),
             path, "tensor '", name, "' must be an object with \"dtype\", \"shape\" and \"data_offsets\", got ",
             describe(info));
  Entry entry{name, DType::f32, {}, 0, 0};

  // dtype: one of the names Lockstep has a type for.
  const Json& dtype = info["dtype"];
  const auto known = std::find_if(std::begin(kDTypeNames), std::end(kDTypeNames), [&dtype](const auto& d) {
    return dtype.is_string() && dtype.get<std::string>() == d.second;
  });
  check_file(known != std::end(kDTypeNames), path, "tensor '", name, "' has dtype ", describe(dtype),
             ", which Lockstep cannot load (supported: F64, F32, F16, BF16, I64, I32, U8, BOOL)");
  entry.dtype = known->first;

  // shape: a list of non-negative integers ([] for a scalar).
  const Json& shape = info["shape"];
  bool shape_ok = shape.is_array();
  for (const Json& d : shape) {
    shape_ok = shape_ok && d.is_number_unsigned() &&
               d.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    if (shape_ok) entry.shape.push_back(static_cast<int64_t>(d.get<uint64_t>()));
  }
  check_file(shape_ok, path, "tensor '", name, "' has shape ", describe(shape),
             "; expected a list of non-negative integers");

  // data_offsets: [begin, end] inside the data section.
  const Json& offsets = info["data_offsets"];
  check_file(offsets.is_array() && offsets.size() == 2 && offsets[0].is_number_unsigned() &&
                 offsets[1].is_number_unsigned() && offsets[0].get<uint64_t>() <= offsets[1].get<uint64_t>(),
             path, "tensor '", name, "' has data_offsets ", describe(offsets),
             "; expected [begin, end] with begin <= end");
  entry.begin = offsets[0].get<uint64_t>();
  entry.end = offsets[1].get<uint64_t>();
  check_file(entry.end <= data_size, path, "tensor '", name, "' has data_offsets ", describe(offsets),
             ", which reach beyond the data section of ", data_size, " bytes (is the file truncated?)");

  // The byte range must hold exactly numel elements of the dtype.
  const std::optional<uint64_t> nbytes = shape_nbytes(entry.shape, entry.dtype);
  check_file(nbytes == entry.end - entry.begin, path, "tensor '", name, "' has dtype ", known->second, " and shape ",
             shape_str(entry.shape), ", which need ", nbytes ? std::to_string(*nbytes) : "2^63 or more",
             " bytes, but its data_offsets ", describe(offsets), " span ", entry.end - entry.begin, " bytes");
  return entry;
}

// Reads the "__metadata__" entry, which must map strings to strings.
std::map<std::string, std::string> parse_metadata(const std::string& path, const Json& json) {
  check_file(json.is_object(), path, "\"", kMetadataKey, "\" must be an object of strings, got ", describe(json));
  std::map<std::string, std::string> metadata;
  for (const auto& [key, value] : json.items()) {
    check_file(value.is_string(), path, "\"", kMetadataKey, "\" must map strings to strings, but '", key,
               "' is ", describe(value));
    metadata[key] = value.get<std::string>();
  }
  return metadata;
}

// How deeply the header's JSON may nest. A valid header nests 3 levels (the header object, a
// tensor's entry, its shape list); the limit leaves room for that many times over and still
// keeps every recursive walk of the parsed value (printing, comparing, destroying) far from the
// end of the stack, which a header nesting a million levels would otherwise reach.
constexpr int kMaxNesting = 64;

// Parses the header text; a tensor name that appears twice is an error, because a JSON parser
// would silently keep only the last one, and so is nesting deeper than kMaxNesting.
Json parse_header(const std::string& path, const std::string& text) {
  // Both checks ride on the parser's callback, which it calls as it opens each object or array
  // and reads each key, with the number of enclosing containers as `depth`. Stopping there means
  // no value deeper than the limit is ever built; scanning the raw bytes for brackets first
  // would have to skip brackets inside strings (and their escapes) to be right, a second JSON
  // lexer for no gain.
  const auto check_structure = [&path, seen = std::set<std::string>()](
                                   int depth, Json::parse_event_t event, Json& parsed) mutable {
    const bool opens = event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start;
    check_file(!opens || depth < kMaxNesting, path, "the header nests JSON more than ", kMaxNesting,
               " levels deep, where a safetensors header needs 3 (the header, a tensor's entry, its shape); the ",
               "file is corrupt or not a safetensors file");
    // Depth 1 holds the top-level keys: the tensor names and "__metadata__".
    if (event == Json::parse_event_t::key && depth == 1)
      check_file(seen.insert(parsed.get<std::string>()).second, path, "the header names tensor '",
                 parsed.get<std::string>(), "' twice");
    return true;
  };
  try {
    return Json::parse(text, check_structure);
  } catch (const Json::parse_error& e) {
    LOCKSTEP_FAIL("load_safetensors: '", path, "': the header is not valid JSON: ", e.what());
  } catch (const Json::exception& e) {
    // The parser's other refusals, such as a number beyond the range of a double (1e999),
    // which JSON's grammar allows but no double can hold.
    LOCKSTEP_FAIL("load_safetensors: '", path, "': the header holds JSON that cannot be read: ",
                  e.what());
  }
}

// Fails unless every element of a BOOL tensor is 0 or 1 (other bytes are not valid C++ bools).
void check_bool_bytes(const std::string& path, const std::string& name, const Tensor& tensor) {
  const auto* bytes = static_cast<const uint8_t*>(tensor.data());
  for (int64_t i = 0; i < tensor.numel(); ++i)
    check_file(bytes[i] <= 1, path, "BOOL tensor '", name, "' holds the byte ", int(bytes[i]), " at element ", i,
               "; BOOL elements must be 0 or 1");
}

// The number of elements of a floating tensor, read as `Bits` (the unsigned integer of their
// width), whose exponent field is all ones: infinities and NaNs. One rule serves all four
// formats, since IEEE binary64, binary32, binary16 and bfloat16 all spell non-finite that way;
// `first` receives the position of the first, `first_text` "inf", "-inf" or "nan".
template <class Bits>
int64_t count_non_finite(const Tensor& tensor, Bits exponent_mask, int64_t* first, const char** first_text) {
  const Bits sign_mask = Bits(Bits(1) << (8 * sizeof(Bits) - 1));
  const auto* data = static_cast<const char*>(tensor.data());
  int64_t found = 0;
  for (int64_t i = 0; i < tensor.numel(); ++i) {
    Bits bits;
    std::memcpy(&bits, data + i * sizeof(Bits), sizeof(Bits));
    if ((bits & exponent_mask) != exponent_mask) continue;
    if (found++ == 0) {
      *first = i;
      const bool nan = (bits & Bits(~(exponent_mask | sign_mask))) != 0;  // a non-zero mantissa: NaN
      *first_text = nan ? "nan" : (bits & sign_mask) != 0 ? "-inf" : "inf";
    }
  }
  return found;
}

// Fails if a floating tensor holds an infinity or a NaN. Such a checkpoint comes from a run that
// had already diverged, and loading it would only carry NaNs into every later step.
void check_finite(const std::string& path, const Entry& entry, const Tensor& tensor) {
  int64_t first = 0, found = 0;
  const char* text = "";
  switch (entry.dtype) {
    case DType::f64: found = count_non_finite<uint64_t>(tensor, 0x7ff0000000000000ull, &first, &text); break;
    case DType::f32: found = count_non_finite<uint32_t>(tensor, 0x7f800000u, &first, &text); break;
    case DType::f16: found = count_non_finite<uint16_t>(tensor, 0x7c00u, &first, &text); break;
    case DType::bf16: found = count_non_finite<uint16_t>(tensor, 0x7f80u, &first, &text); break;
    default: return;  // integers and booleans are always finite
  }
  check_file(found == 0, path, "tensor '", entry.name, "' (", safetensors_dtype_name(entry.dtype), ", shape ",
             shape_str(entry.shape), ") holds ", found, " non-finite value", found == 1 ? "" : "s", ", the first ",
             text, " at element ", first, "; the run that saved it had diverged: load an earlier checkpoint ",
             "or train again (with a lower learning rate, say)");
}

}  // namespace

void save_safetensors(const std::string& path, const StateDict& tensors,
                      const std::map<std::string, std::string>& metadata) {
  // Check every tensor and lay out the data section before touching the disk, so bad input
  // never creates or replaces a file.
  Json header = Json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  std::vector<Tensor> dense;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    LOCKSTEP_CHECK(name != kMetadataKey, "save_safetensors: '", kMetadataKey,
                   "' is reserved for the metadata map and cannot name a tensor");
    LOCKSTEP_CHECK(!header.contains(name), "save_safetensors: the state dict holds two tensors named '", name,
                   "'; names must be unique");
    LOCKSTEP_CHECK(tensor.defined(), "save_safetensors: tensor '", name, "' is undefined");
    LOCKSTEP_CHECK(tensor.device().is_cpu(), "save_safetensors: tensor '", name, "' is on ", tensor.device(),
                   "; move it to the CPU first (tensor.to(Device::cpu()))");
    // The file stores elements in row-major order: make views (transposes, slices) dense.
    Tensor t = tensor.detach().contiguous();
    const uint64_t nbytes = static_cast<uint64_t>(t.numel()) * element_size(t.dtype());
    Json info = Json::object();
    info["dtype"] = safetensors_dtype_name(t.dtype());
    info["shape"] = t.shape();
    info["data_offsets"] = {offset, offset + nbytes};
    header[name] = info;
    offset += nbytes;
    dense.push_back(t);
  }

  std::string text;
  try {
    text = header.dump();
  } catch (const Json::type_error& e) {
    LOCKSTEP_FAIL("save_safetensors: a tensor name or metadata string is not valid UTF-8 (", e.what(),
                  ")");
  }
  // Pad with spaces (valid JSON whitespace) so that the data starts at a multiple of 8 bytes.
  text.append((8 - text.size() % 8) % 8, ' ');

  // The length prefix: the header size as 8 little-endian bytes.
  unsigned char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(uint64_t(text.size()) >> (8 * i));

  AtomicFile file(path);
  file.write(length, sizeof(length));
  file.write(text.data(), text.size());
  for (const Tensor& t : dense) file.write(t.data(), static_cast<size_t>(t.numel()) * element_size(t.dtype()));
  file.commit();
}

namespace detail {
void set_save_before_rename_hook(std::function<void(const std::string&)> hook) {
  before_rename_hook() = std::move(hook);
}
}  // namespace detail

StateDict load_safetensors(const std::string& path, std::map<std::string, std::string>* metadata) {
  const UniqueFile file = fopen_regular_file("load_safetensors", path, "rb");
  check_file(file != nullptr, path, "cannot open the file: ", std::strerror(errno));
  const auto read = [&](void* out, uint64_t nbytes, const char* what) {
    if (nbytes == 0) return;  // empty tensors may have no memory to point at
    check_file(std::fread(out, 1, nbytes, file.get()) == nbytes, path, "cannot read ", what, ": ",
               std::ferror(file.get()) ? std::strerror(errno) : "unexpected end of file");
  };

  // The file's size bounds everything the header may claim.
  struct stat info;
  check_file(::fstat(::fileno(file.get()), &info) == 0, path, "cannot find the size of the file: ",
             std::strerror(errno));
  const uint64_t file_size = static_cast<uint64_t>(info.st_size);
  check_file(file_size >= 8, path, "the file is ", file_size,
             " bytes long, too short for a safetensors file, which starts with an 8-byte header length");

  // Bytes 0..7: the header length, little-endian.
  unsigned char length[8];
  read(length, 8, "the header length");
  uint64_t header_size = 0;
  for (int i = 0; i < 8; ++i) header_size |= uint64_t(length[i]) << (8 * i);
  check_file(header_size <= file_size - 8, path, "the header length is ", header_size, " bytes but only ",
             file_size - 8, " bytes follow it (truncated, or not a safetensors file)");

  // The JSON header.
  std::string text(header_size, '\0');
  read(text.data(), header_size, "the header");
  const Json header = parse_header(path, text);
  check_file(header.is_object(), path, "the header must be a JSON object, got ", header.type_name());

  const uint64_t data_size = file_size - 8 - header_size;
  std::vector<Entry> entries;
  if (metadata != nullptr) metadata->clear();
  for (const auto& [name, info] : header.items()) {
    if (name == kMetadataKey) {
      const auto parsed = parse_metadata(path, info);
      if (metadata != nullptr) *metadata = parsed;
    } else {
      entries.push_back(parse_entry(path, name, info, data_size));
    }
  }

  // In data order, each tensor must start where the previous one ended and the last must end
  // at the end of the file: no byte is claimed twice and none is left unexplained. (Stable, so
  // empty tensors sharing an offset keep their header order.)
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expected = 0;
  for (const Entry& e : entries) {
    check_file(e.begin <= expected, path, "tensor '", e.name, "' starts at data offset ", e.begin,
               " but the tensors before it end at ", expected, ", leaving a gap of ", e.begin - expected, " bytes");
    check_file(e.begin >= expected, path, "tensor '", e.name, "' starts at data offset ", e.begin,
               ", inside the previous tensor, which ends at ", expected, " (overlapping data_offsets)");
    expected = e.end;
  }
  check_file(expected == data_size, path, "the tensors cover ", expected, " bytes of data but the file holds ",
             data_size, " bytes after the header");

  // The data: read straight into each new tensor, in file order (no gaps, so no seeking).
  StateDict result;
  for (const Entry& e : entries) {
    Tensor t = empty(e.shape, TensorOptions().dtype(e.dtype));
    read(t.data(), e.end - e.begin, ("the data of tensor '" + e.name + "'").c_str());
    if (e.dtype == DType::boolean) check_bool_bytes(path, e.name, t);
    check_finite(path, e, t);
    result.emplace_back(e.name, t);
  }
  return result;
}

}  // namespace lockstep
