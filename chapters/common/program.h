/// \file
/// What every chapter program shares: parsing flags (CLI11), turning errors into one line (with
/// advice about the flags) and a non-zero exit, and the final machine-readable `RESULT` line.
/// The library knows no program: this is the layer that knows the chapters' flags.
#pragma once

#include <CLI/CLI.hpp>

#include <exception>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace lockstep {

/// Parses the command line into `app`, then runs `body`. `--help` prints the flags and returns 0;
/// an unknown or malformed flag, or an exception (such as lockstep::Error) thrown by `body`, prints
/// "<program>: error: <error_message>" on stderr and returns 1 (or CLI11's code for parse
/// errors). A rank of a distributed job that fails this way ends the whole job (abort_job),
/// unless every rank stopped on the same AgreedError: then each leaves cleanly with exit 1.
int run_program(CLI::App& app, int argc, char** argv, const std::function<int()>& body);

/// What a program says about `error`: its message, and for a lockstep::Error whose kind a flag
/// of the chapters can fix, which flag, e.g. "cannot use cuda:0: ... (use --device cpu)".
std::string error_message(const std::exception& error);

/// A CLI11 check for a flag whose value must be above zero (`--epochs`, `--batch-size`, `--lr`):
/// "0", "-1", "abc", "inf" or "nan" is refused with "--lr: expected a number above 0, got '-1'".
/// (CLI11's own CLI::PositiveNumber would answer "Value -1 not in range 0.000000 to 1797693...".)
/// A whole number must also fit in 64 bits and be written in decimal (see number_between). Help
/// shows the flag as `INT:POSITIVE` or `FLOAT:POSITIVE`.
CLI::Validator positive_number();

/// A CLI11 check for a flag that may also be zero, where zero means something (`--max-steps 0`:
/// no limit; `--seed 0`): "-1", "abc" or "inf" is refused with "expected a number of 0 or more,
/// got '-1'". Help shows `NONNEGATIVE`.
CLI::Validator non_negative_number();

/// A CLI11 check for a flag whose value must lie from `min` to `max`, both included
/// (`--momentum`: 0 to 1): "1.5" or "nan" is refused with "expected a number from 0 to 1, got
/// 'nan'" (CLI::Range lets NaN through: every comparison with it is false). Like the checks
/// above, it refuses a whole number beyond 2^63 - 1, which CLI11 would silently clamp to 2^63 - 1,
/// and one written in octal or hexadecimal ("010", "0x10"), which CLI11 would read as 8 and 16.
CLI::Validator number_between(double min, double max);

/// The most threads `--threads` takes. A thread per core is what speeds a kernel up, and the
/// largest machines have a few hundred hardware threads (two 192-core CPUs with two threads per
/// core: 768); far beyond that, the OpenMP runtime fails to start its threads and crashes
/// (`--threads 100000`), so the flag stops there with a message instead.
constexpr int kMaxThreads = 1024;

/// The CLI11 check of `--threads`: 0 (all cores) to kMaxThreads, as number_between.
CLI::Validator thread_count();

/// Refuses, with a sentence naming `flag`, an output `path` the program could not write at the
/// end of its run: its folder does not exist, it is a folder itself, it is not a regular file
/// (`--save /dev/null: this is a character device; name a regular file to write`; a FIFO, a
/// socket), or a file cannot be created (or opened for writing) there, e.g. on a read-only file
/// system. So a program that writes its files after training fails before its work rather than
/// after it. The check tries the write, without blocking (util/regular_file.h), and leaves
/// nothing behind: an existing file is opened without being changed, and a file made only for
/// the try is removed (through a symbolic link: the file it points to). An empty path (the
/// flag not given) passes.
void check_output_file(const std::string& flag, const std::string& path);

/// Refuses, with a sentence naming `flag`, an input `path` the program could not read later:
/// one that is not a regular file (`--load in: this is a FIFO (named pipe); name a regular
/// file to read`; a folder, a device, a socket) or that cannot be opened for reading (`--resume
/// x: cannot read this file (No such file or directory)`). Called before any data is loaded,
/// so that a wrong path costs no time. An empty path (the flag not given) passes.
void check_input_file(const std::string& flag, const std::string& path);

/// The last line a chapter prints: `RESULT chapter=N key=value key=value ...`, read by the tests
/// and benchmarks. Keys keep the order in which they were added.
class ResultLine {
 public:
  /// Starts the line for chapter `chapter`.
  explicit ResultLine(int chapter) { add("chapter", chapter); }
  /// Appends `key=value` (numbers are printed with up to 6 significant digits).
  template <class T>
  ResultLine& add(const std::string& key, const T& value) {
    std::ostringstream text;
    text.precision(6);
    text << value;
    fields_.push_back(key + "=" + text.str());
    return *this;
  }
  /// The whole line, starting with "RESULT".
  std::string str() const;

 private:
  std::vector<std::string> fields_;
};

}  // namespace lockstep
