// What the fuzz targets share: the readers under test take file names, so each input is written
// to a file of its own first, in a folder private to this process; and a failed property stops
// the process (abort) with a message, which libFuzzer and the replay driver report as a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

namespace lockstep::fuzz {

/// A folder private to this process, made on first use (under /dev/shm where it exists, so
/// that writing each input costs no disk I/O; else $TMPDIR or /tmp) and removed at exit.
const std::string& scratch_folder();

/// Writes `size` bytes at `data` to `scratch_folder()/name` (replacing it) and returns its path.
std::string write_file(const std::string& name, const uint8_t* data, size_t size);

/// The input read as lines of KEY=VALUE, for the targets that feed settings: a line without
/// '=' is ignored, and a later line replaces an earlier one with the same key. Bytes are kept
/// as they are (a zero byte included).
std::map<std::string, std::string> key_value_lines(const uint8_t* data, size_t size);

/// Stops the process with "fuzz property failed: <what>" on stderr unless `holds`: a reader
/// returned something its documentation rules out.
void require(bool holds, const std::string& what);

}  // namespace lockstep::fuzz
