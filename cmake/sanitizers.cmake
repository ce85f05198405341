# Sanitizers and fuzzing: compiler instrumentation that turns silent memory errors, undefined
# behaviour and data races into a report naming the line, so that the ordinary tests can find
# them (Makefile: make sanitize, make tsan, make fuzz; README "Sanitizers and fuzzing").
#
#   LOCKSTEP_SANITIZE=address;undefined   AddressSanitizer (out-of-bounds and use-after-free
#                                          accesses, leaks) and UndefinedBehaviorSanitizer
#                                          (signed overflow, misaligned or null accesses, bad
#                                          shifts, ...); undefined behaviour stops the program,
#                                          so a test that hits it fails instead of printing a
#                                          warning and passing.
#   LOCKSTEP_SANITIZE=thread              ThreadSanitizer (data races between threads).
#   LOCKSTEP_FUZZ=ON                      libFuzzer's coverage instrumentation for the fuzz
#                                          targets of fuzz/ and the readers they feed (Clang
#                                          only; add address;undefined).
#
# Included by the top-level CMakeLists.txt after the CUDA decision and before any target, so
# that the flags reach the library, the chapters and the tests alike. Only C++ is instrumented:
# the CUDA kernels are checked by compute-sanitizer instead (make gpu-check).

set(LOCKSTEP_SANITIZE "" CACHE STRING
    "Sanitizers to build with: a list of address, undefined, leak or thread (empty: none)")
option(LOCKSTEP_FUZZ "Build the libFuzzer targets of fuzz/ (needs Clang)" OFF)

if(LOCKSTEP_SANITIZE)
  foreach(sanitizer IN LISTS LOCKSTEP_SANITIZE)
    if(NOT sanitizer MATCHES "^(address|undefined|leak|thread)$")
      message(FATAL_ERROR "LOCKSTEP_SANITIZE: unknown sanitizer '${sanitizer}'; expected a list of address, "
                          "undefined, leak or thread, e.g. -DLOCKSTEP_SANITIZE=address\\;undefined")
    endif()
  endforeach()
  if("thread" IN_LIST LOCKSTEP_SANITIZE AND ("address" IN_LIST LOCKSTEP_SANITIZE OR "leak" IN_LIST LOCKSTEP_SANITIZE))
    message(FATAL_ERROR "LOCKSTEP_SANITIZE: thread cannot be combined with address or leak (the compilers "
                        "refuse it); use two build folders, as make sanitize and make tsan do")
  endif()
  if(LOCKSTEP_CUDA)
    message(FATAL_ERROR "LOCKSTEP_SANITIZE instruments the C++ code of a CPU-only build: add "
                        "-DLOCKSTEP_WITH_CUDA=OFF (the CUDA kernels are checked by compute-sanitizer: make gpu-check)")
  endif()
  string(REPLACE ";" "," sanitizers "${LOCKSTEP_SANITIZE}")
  # Frame pointers give the reports whole stack traces at little cost.
  set(sanitizer_flags -fsanitize=${sanitizers} -fno-omit-frame-pointer)
  if("undefined" IN_LIST LOCKSTEP_SANITIZE)
    list(APPEND sanitizer_flags -fno-sanitize-recover=undefined)
  endif()
  # GCC's flow analysis sees the sanitizers' added checks as paths on which a variable may be
  # read unset, and warns in code that is fine (std::regex and std::function, for one); the
  # sanitizers themselves are the better judge of what a run actually reads.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    list(APPEND sanitizer_flags -Wno-maybe-uninitialized)
  else()
    # Clang builds (make sanitize, make tsan, make fuzz) meet the sources' pragmas for GCC's
    # warnings.
    list(APPEND sanitizer_flags -Wno-unknown-warning-option)
  endif()
  # -O1 with line tables only (-g1): every report still names file and line, the build takes
  # about half the time of RelWithDebInfo's -O2 -g, and -O1 is the level the sanitizers are
  # documented to run well at. Compile options follow CMAKE_CXX_FLAGS_<CONFIG> on the command
  # line, so these win over the build type's.
  list(APPEND sanitizer_flags -O1 -g1)
  foreach(flag IN LISTS sanitizer_flags)
    add_compile_options($<$<COMPILE_LANGUAGE:CXX>:${flag}>)
  endforeach()
  add_link_options(-fsanitize=${sanitizers})
  message(STATUS "Lockstep: sanitizers ${sanitizers}")
endif()

if(LOCKSTEP_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "LOCKSTEP_FUZZ needs Clang, whose libFuzzer drives the fuzz targets: configure with "
                        "-DCMAKE_CXX_COMPILER=clang++ (Debian: apt-get install clang libclang-rt-dev libomp-dev)")
  endif()
  # The coverage feedback (-fsanitize=fuzzer-no-link) goes to the files each target reads
  # with, and libFuzzer's main to the targets: fuzz/CMakeLists.txt.
endif()
