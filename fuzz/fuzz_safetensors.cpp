// Fuzz target: the safetensors reader (load_safetensors; src/io/safetensors.h).
//
// Feeds: the whole input is the file, header length, JSON header and data as they come.
// Asserts: no crash (deep or hostile JSON included), no undefined behaviour, no hang, and no
// exception but lockstep::Error (nlohmann-json's own exceptions must not escape); a file that
// loads gives contiguous CPU tensors of the dtypes the format lists whose data fills the file
// after the header, and saving them with their metadata and loading that again gives the same
// names, dtypes, shapes, bytes and metadata.
#include <cstring>
#include <map>
#include <string>

#include "core/error.h"
#include "fuzz_input.h"
#include "io/safetensors.h"

using lockstep::fuzz::require;

namespace {

uint64_t nbytes(const lockstep::Tensor& t) {
  return static_cast<uint64_t>(t.numel()) * lockstep::element_size(t.dtype());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = lockstep::fuzz::write_file("model.safetensors", data, size);
  std::map<std::string, std::string> metadata;
  lockstep::StateDict tensors;
  try {
    tensors = lockstep::load_safetensors(path, &metadata);
  } catch (const lockstep::Error&) {
    return 0;  // the documented way to refuse a file
  }

  // It loaded: the header length and the tensors' bytes account for the whole file.
  require(size >= 8, "a file that loads holds the 8-byte header length");
  uint64_t header = 0;
  for (int i = 0; i < 8; ++i) header |= uint64_t(data[i]) << (8 * i);
  uint64_t data_bytes = 0;
  for (const auto& [name, t] : tensors) {
    require(t.device().is_cpu() && t.is_contiguous(), "tensor '" + name + "' is a contiguous CPU tensor");
    data_bytes += nbytes(t);
  }
  require(8 + header + data_bytes == size, "the header and the tensors' data fill the file exactly");

  // What loads saves, and loads again as the same.
  const std::string copy = lockstep::fuzz::scratch_folder() + "/copy.safetensors";
  lockstep::save_safetensors(copy, tensors, metadata);
  std::map<std::string, std::string> metadata_again;
  const lockstep::StateDict again = lockstep::load_safetensors(copy, &metadata_again);
  require(metadata_again == metadata, "the metadata survives saving and loading");
  require(again.size() == tensors.size(), "every tensor survives saving and loading");
  for (size_t i = 0; i < tensors.size(); ++i) {
    const lockstep::Tensor& a = tensors[i].second;
    const lockstep::Tensor& b = again[i].second;
    require(again[i].first == tensors[i].first && a.dtype() == b.dtype() && a.shape() == b.shape(),
            "tensor '" + tensors[i].first + "' keeps its place, name, dtype and shape");
    require(nbytes(a) == 0 || std::memcmp(a.data(), b.data(), nbytes(a)) == 0,
            "tensor '" + tensors[i].first + "' keeps its bytes");
  }
  return 0;
}
