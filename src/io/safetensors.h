/// \file
/// Saving and loading state dicts in the safetensors format, the checkpoint format of the
/// Hugging Face ecosystem (https://github.com/huggingface/safetensors), so that a Lockstep
/// checkpoint can be opened by PyTorch's `safetensors.torch.load_file` and the other way round.
///
/// A safetensors file has three parts, one after the other:
///
///     bytes 0..7      N, the length of the header, as a little-endian unsigned 64-bit integer
///     bytes 8..8+N    the header: a UTF-8 JSON object with one entry per tensor,
///                       "fc.weight": {"dtype": "F32", "shape": [10, 784], "data_offsets": [0, 31360]}
///                     and optionally "__metadata__": {"key": "value", ...} (strings only)
///     the rest        the data: every tensor's elements in row-major order, little-endian,
///                     packed one after another with no gaps
///
/// `data_offsets` = [begin, end) counts bytes from the start of the data, not of the file, so
/// end - begin must equal numel * element size. The dtype names are F64, F32, F16, BF16, I64,
/// I32, U8 and BOOL (one byte, 0 or 1). The header is padded with spaces to a multiple of 8
/// bytes, as the reference implementation does, so that the data starts 8-byte aligned.
///
/// Unlike pickle-based `torch.save`, reading such a file runs no code: it is JSON plus raw
/// bytes, which is why every check below is about the numbers agreeing with each other.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "nn/state_dict.h"

namespace lockstep {

/// Writes `tensors` to `path` in the safetensors format, like `safetensors.torch.save_file`.
///
/// The header lists the tensors in the state dict's order and their data follows in that same
/// order, so the same state dict always gives the same bytes (the reference implementation
/// instead sorts by dtype and name; readers do not depend on the order). `metadata`, when not
/// empty, is written first as the header's `"__metadata__"` entry.
///
/// Tensors must be on the CPU (move them with `tensor.to(Device::cpu())` first); non-contiguous
/// tensors are saved as their contiguous copy. The file is written atomically, to the file
/// `path` finally names through its symbolic links, as `torch.save` writes through them (the
/// link stays a link and points at the new contents; a dangling link's target is created): the
/// bytes go to that file's name + ".tmp", beside it, reach the disk (fsync), and only then
/// replace it by a rename, whose new directory entry is made durable by an fsync of the folder;
/// so the file holds either the old checkpoint or the complete new one, never a half-written
/// file, even after a crash or a power cut. A `.tmp` left behind by a killed save is simply
/// replaced by the next one. A `path` that exists and is not a regular file (a device such as
/// /dev/null, a FIFO, a socket, a folder) is refused before anything is written: it is never
/// replaced.
///
/// Throws lockstep::Error for duplicate names, the reserved name `__metadata__`, undefined or
/// non-CPU tensors, a `path` that is not a regular file (`save_safetensors: '/dev/null' is a
/// character device; name a regular file`), and any failure to create, write or rename the
/// file (naming the path and the system's reason).
void save_safetensors(const std::string& path, const StateDict& tensors,
                      const std::map<std::string, std::string>& metadata = {});

/// Reads a safetensors file into a state dict, like `safetensors.torch.load_file`. The tensors
/// are new contiguous CPU tensors returned in the order of their data in the file (the order
/// save_safetensors wrote them in); if `metadata` is not null it receives the
/// `"__metadata__"` entry (empty when the file has none).
///
/// Everything in the file is checked before it is trusted, and each problem is a one-line
/// lockstep::Error naming the file: a path that is not a regular file (a FIFO is refused without
/// waiting for a writer, see util/regular_file.h), too short to hold the header length, a header length beyond
/// the end of the file, invalid JSON (with the parser's message), JSON nested more than 64
/// levels deep (a valid header nests 3; the limit keeps a hostile header from exhausting the
/// stack), an unsupported dtype, a missing or malformed field, a shape that does not match its
/// byte range, byte ranges outside the data, overlapping or leaving gaps, duplicate tensor
/// names, BOOL bytes other than 0/1, and infinities or NaNs in a floating tensor (F64, F32, F16,
/// BF16), which name the tensor, e.g. `load_safetensors: 'model.safetensors': tensor
/// 'fc.weight' (F32, shape [10, 784]) holds 2 non-finite values, the first nan at element 17;
/// the run that saved it had diverged: ...`. save_safetensors writes such values without
/// complaint, so the file can still be inspected with other tools.
StateDict load_safetensors(const std::string& path, std::map<std::string, std::string>* metadata = nullptr);

namespace detail {
/// For tests of crash safety only: when set, save_safetensors calls `hook(temporary_path)`
/// after the temporary file is complete and on disk and before renaming it over the target.
/// A hook that throws makes the save fail there (the temporary is removed, the target is
/// untouched); one that calls _exit() simulates a process killed between write and rename
/// (the temporary stays). Pass an empty function to remove it. Not thread-safe.
void set_save_before_rename_hook(std::function<void(const std::string& temporary_path)> hook);
}  // namespace detail

}  // namespace lockstep
