#!/usr/bin/env bash
# The sanitizer suites behind `make sanitize` and `make tsan`: configures a CPU-only build with
# the sanitizers on, in a folder of its own (make fuzz shares make sanitize's), builds only what
# the chosen tests run, and runs those tests with CTest. A sanitizer's report fails the test
# that triggered it, naming the source line (README, "Sanitizers and fuzzing").
#
#   tools/sanitize.sh asan [BUILD_DIR]   AddressSanitizer + UndefinedBehaviorSanitizer (Clang):
#                                        the unit and MPI tests, the fuzz targets' replays
#                                        (labels unit, mpi, fuzz) and a representative subset
#                                        of the chapter programs' runs (label chapter; below)
#   tools/sanitize.sh tsan [BUILD_DIR]   ThreadSanitizer (Clang with LLVM's OpenMP and its Archer
#                                        tool): the tests of the code that runs threads, i.e. the
#                                        DataLoader's workers, the trace's per-thread rows,
#                                        DataParallel's replicas and the MPI process groups' worker
#                                        threads (all MPI tests, on 2 ranks)
#
# TESTS=regex picks tests of the suite's labels instead (ctest -R), e.g. TESTS=Safetensors, or
# TESTS=chapter3_metrics for a chapter test outside the subset.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-}
build=${2:-build-$mode}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
settings=$PWD/tools/sanitizers

case "$mode" in
  asan)
    tools/sanitizers/configure_asan.sh "$build"
    # The programs the suite's tests start (TESTS=regex may pick any test of its labels, so it
    # builds every program those tests may start).
    targets="unit_tests planted_bugs mpi_tests failing_rank faulty_rank sharded_checkpoint_tool fuzz_idx fuzz_cifar10
             fuzz_safetensors fuzz_launch fuzz_checkpoint chapter1 chapter2 chapter3 chapter4 chapter5 chapter6 chapter8"
    labels='^(unit|mpi|chapter|fuzz)$'
    tests=${TESTS:-}
    if [ -n "$tests" ]; then targets=all_test_programs; fi
    # ResNet-50's unit tests build and run the whole model at full size (about half the unit
    # tests' time under the sanitizers); its convolutions, batch norms and pools are the
    # kernels the Conv2d, BatchNorm, MaxPool and Models tests run on small shapes.
    unit_exclude='^ResNet50$'
    # Any report stops the process with a non-zero exit and a stack trace. Open MPI's own
    # leaks are suppressed, each for a reason given in lsan.supp; Lockstep's are not.
    # A request beyond memory returns null, as malloc does without ASan, so that the tests of
    # the allocator's "out of memory" error see that error instead of ASan's report.
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1:allocator_may_return_null=1}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
    export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$settings/lsan.supp:print_suppressions=0}
    # The processes that start MPI (the MPI tests, and chapters 4 onwards, which start it even
    # alone) record whole stacks for each allocation, so that Open MPI's leaks can be told
    # from Lockstep's (lsan.supp); that slow unwinding would double the other tests' time.
    mpi_asan_options="$ASAN_OPTIONS:fast_unwind_on_malloc=0"
    # The chapter programs' runs: a subset, to keep the suite within its time on two cores
    # (instrumented code runs several times slower, and a chapter run spends much of it
    # loading the data and evaluating 10,000 test images). The unit tests already run every op, module, optimiser,
    # reader and writer under the sanitizers, and the fuzz replays every reader on bad input;
    # what only a whole program runs is its main path, so the subset is one run of each:
    #   chapter1_smoke to chapter3_smoke  each program from its flags to its RESULT line
    #                                     (chapter 3: DataParallel's replicas on threads)
    #   chapter2_save, chapter2_load      weights saved by one run and read by the next
    #   chapter5_smoke                    the CNN's convolutions under bf16 autocast
    #   chapter4_mpirun_trace             DDP over MPI on 2 ranks (the worker thread, the
    #                                     buckets), and every rank's timeline gathered by rank 0
    #   chapter5_mpirun_bf16_compressed_gradients
    #                                     the all-reduce of bf16 copies of the gradients
    #   chapter6_mpirun_2_ranks           SyncBatchNorm's all-gathers, a checkpoint written by
    #                                     rank 0 and read back by every rank
    #   chapter8_fsdp_options             FSDP on 2 ranks: units gathered, freed and refilled,
    #                                     reduce-scatters, clipping over shards, bf16 autocast
    # Left out: chapter4_smoke and chapter6_smoke (the same programs alone, which the 2-rank
    # runs cover), the refusals (a flag's or a file's check, then an exit; the checks are unit
    # tests), runs that repeat a path above with another model, more ranks or more steps, and
    # the fault lab's jobs (ended on purpose by a timeout or a kill: minutes, on paths the MPI
    # tests' watchdog jobs take too). Of the MPI tests, the 3-rank run is left out: the 2-rank
    # one with one more rank. make test runs them all; a new chapter adds its runs here.
    # This build is also .ci/run's build without CUDA (sanitizers.cmake refuses CUDA): it
    # compiles the CPU-only fallbacks, chapter 1 runs, the unit test
    # ErrorMessage.AnAbsentGpuEndsWithTheDeviceFlag checks the "built without CUDA" sentence,
    # and chapter2_cuda_without_gpu a chapter's refusal of --device cuda.
    one_process_runs='^(chapter[1-3]_smoke|chapter2_save|chapter2_load|chapter2_cuda_without_gpu)$'
    mpi_runs='^(chapter5_smoke|chapter4_mpirun_trace|chapter5_mpirun_bf16_compressed_gradients|chapter6_mpirun_2_ranks|chapter8_fsdp_options)$'
    ;;
  tsan)
    # Clang and LLVM's OpenMP runtime (libomp): GCC's libgomp is not instrumented, so every
    # OpenMP barrier would look like no synchronisation at all and each parallel loop like a
    # race. libomp reports its synchronisation to Archer (OMP_TOOL_LIBRARIES), which passes it on
    # to ThreadSanitizer; OpenMP code is then checked like any other.
    archer=$(clang++ -print-file-name=libarcher.so 2>/dev/null || true)
    if [ ! -f "$archer" ]; then
      archer=$(ls /usr/lib/llvm-*/lib/libarcher.so 2>/dev/null | tail -n 1 || true)
    fi
    if [ ! -f "$archer" ]; then
      echo "make tsan: LLVM's libarcher.so was not found; it comes with Debian's libomp-dev (apt-get install clang libomp-dev)" >&2
      exit 1
    fi
    cmake -S . -B "$build" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLOCKSTEP_WITH_CUDA=OFF \
      -DLOCKSTEP_SANITIZE=thread >/dev/null
    targets="unit_tests mpi_tests planted_bugs"
    labels='^(unit|mpi)$'
    tests=${TESTS:-'^((DataLoader|TensorDataset|Sampler|Trace|DataParallel|Replicate|Scatter|Gather)\.|mpi_tests_2_ranks$|sanitizer_)'}
    export OMP_TOOL_LIBRARIES=$archer
    export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:ignore_noninstrumented_modules=1:suppressions=$settings/tsan.supp}
    ;;
  *)
    echo "usage: tools/sanitize.sh asan|tsan [BUILD_DIR]" >&2
    exit 2
    ;;
esac

if [ "$targets" = all_test_programs ]; then
  targets=$(cmake --build "$build" --target help | sed -n 's/^\.\.\. \([^ ]*\).*/\1/p' |
    grep -vE '\.(o|i|s)$|^(all|clean|depend|edit_cache|rebuild_cache|test|install.*|docs|gpu_tests|gradient_parity|mpi_ddp_sync)$|^(bench_|exercise_|check_exercise_)')
fi
# shellcheck disable=SC2086  # the target list is meant to split into words
cmake --build "$build" -j "$jobs" --target $targets
cd "$build"
# One test at a time, as make test runs them (each uses every core through OpenMP).
if [ "$mode" = tsan ] || [ -n "$tests" ]; then
  # (A run narrowed by TESTS unwinds whole stacks everywhere: slower, but one run.)
  if [ -n "${mpi_asan_options:-}" ]; then export ASAN_OPTIONS=$mpi_asan_options; fi
  ctest --output-on-failure -L "$labels" ${tests:+-R "$tests"}
  exit
fi
status=0
# Processes that never start MPI, with fast unwinding.
ctest --output-on-failure -L '^(unit|fuzz)$' -E "$unit_exclude" || status=1
ctest --output-on-failure -L '^chapter$' -R "$one_process_runs" || status=1
# Processes that start MPI, with whole stacks: the MPI tests (not the chapter runs under mpirun,
# which carry the label mpi too) and the chapter runs of chapters 4 onwards, which start MPI
# even alone.
ASAN_OPTIONS=$mpi_asan_options ctest --output-on-failure -L '^mpi$' -LE '^chapter$' -E '_3_ranks$' || status=1
ASAN_OPTIONS=$mpi_asan_options ctest --output-on-failure -L '^chapter$' -R "$mpi_runs" || status=1
exit $status
