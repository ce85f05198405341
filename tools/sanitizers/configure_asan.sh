#!/usr/bin/env bash
# Configures the build that make sanitize and make fuzz share (tools/sanitize.sh asan,
# tools/fuzz.sh): CPU only, Clang, AddressSanitizer and UndefinedBehaviorSanitizer, the fuzz
# targets linked with libFuzzer (cmake/sanitizers.cmake, fuzz/CMakeLists.txt). One folder for
# both, so that .ci/run compiles the library with these sanitizers once.
#
#   tools/sanitizers/configure_asan.sh BUILD_DIR
set -euo pipefail
if ! command -v clang++ >/dev/null; then
  echo "make sanitize and make fuzz need Clang and its libFuzzer: apt-get install clang libclang-rt-dev libomp-dev" >&2
  exit 1
fi
cmake -S "$(dirname "$0")/../.." -B "$1" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DLOCKSTEP_WITH_CUDA=OFF "-DLOCKSTEP_SANITIZE=address;undefined" -DLOCKSTEP_FUZZ=ON >/dev/null
