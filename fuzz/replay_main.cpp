// The main() of a fuzz target built without libFuzzer (any compiler, any build): runs the
// target once on each file named on the command line, or on each file inside a named folder,
// and fails if there are none. This is how the ordinary tests and the sanitizer builds replay
// the seed corpora and every crash the fuzzer ever found (fuzz/CMakeLists.txt); a bad input
// ends the process inside the target (abort, or a sanitizer's report), naming the file first.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  if (argc < 2) {
    std::cerr << "usage: " << argv[0] << " FILE_OR_FOLDER...: runs this fuzz target on each file\n";
    return 2;
  }
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    const fs::path arg = argv[i];
    if (fs::is_directory(arg)) {
      for (const auto& entry : fs::recursive_directory_iterator(arg))
        if (entry.is_regular_file()) files.push_back(entry.path());
    } else if (fs::is_regular_file(arg)) {
      files.push_back(arg);
    } else {
      std::cerr << arg.string() << ": no such file or folder\n";
      return 2;
    }
  }
  if (files.empty()) {
    std::cerr << "no input files to replay under the folders given\n";
    return 2;
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& file : files) {
    std::cerr << "replaying " << file.string() << std::endl;
    std::ifstream in(file, std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::cout << "replayed " << files.size() << " input(s) without a failure\n";
  return 0;
}
