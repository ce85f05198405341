# The chapter programs' tests (label chapter; those under mpirun also mpi), beside the scripts
# they run (run_program.cmake, compare_checksums.cmake, ...). Included by tests/CMakeLists.txt,
# which defines lockstep_program_test; being included rather than a subdirectory, the tests
# write their files into the build's tests/ folder, where tests/gpu/check_on_gpu.sh finds the
# made-up datasets. Each file holds one kind of test:
#   runs.cmake      the programs run and say what they did (RESULT lines, devices, AMP, warm-up)
#   refusals.cmake  bad flags, data, devices and checkpoints refused with a sentence
#   outputs.cmake   the files they write (weights, traces, --metrics CSVs) and unwritable paths
#   mpirun.cmake    under mpirun: ranks in lockstep, disagreeing ranks, the fault lab, checkpoints
#   file_refusals.cmake  FIFOs and device nodes refused, data files that differ between ranks
set(CHECK_METRICS ${CMAKE_CURRENT_LIST_DIR}/check_metrics_csv.cmake)
set(COMPARE_CHECKSUMS ${CMAKE_CURRENT_LIST_DIR}/compare_checksums.cmake)
set(RESUME_AFTER_KILL ${CMAKE_CURRENT_LIST_DIR}/resume_after_kill.cmake)

# Made-up CIFAR-10 datasets of 20 records per file: one where every image is alike (label 1,
# every pixel 1), for the ResNets' runs and refusals,
set(FAKE_CIFAR ${CMAKE_CURRENT_BINARY_DIR}/fake-cifar10)
string(ASCII 1 one)
string(REPEAT "${one}" 61460 twenty_records)  # 20 records of 1 + 3072 bytes
foreach(name data_batch_1 data_batch_2 data_batch_3 data_batch_4 data_batch_5 test_batch)
  file(WRITE ${FAKE_CIFAR}/${name}.bin "${twenty_records}")
endforeach()
# and one whose images differ (random pixels, labels 1-9), so that BatchNorm's running
# statistics move differently on every rank (mpirun.cmake, and check_on_gpu.sh's ResNet runs).
set(VARIED_CIFAR ${CMAKE_CURRENT_BINARY_DIR}/varied-cifar10)
set(varied_records "")
foreach(i RANGE 1 20)
  math(EXPR label "${i} % 9 + 1")
  string(ASCII ${label} label_byte)
  string(RANDOM LENGTH 3072 ALPHABET "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
         RANDOM_SEED ${i} pixels)
  string(APPEND varied_records "${label_byte}${pixels}")
endforeach()
foreach(name data_batch_1 data_batch_2 data_batch_3 data_batch_4 data_batch_5 test_batch)
  file(WRITE ${VARIED_CIFAR}/${name}.bin "${varied_records}")
endforeach()

include(${CMAKE_CURRENT_LIST_DIR}/runs.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/refusals.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/outputs.cmake)
if(LOCKSTEP_MPI)
  include(${CMAKE_CURRENT_LIST_DIR}/mpirun.cmake)
endif()
include(${CMAKE_CURRENT_LIST_DIR}/file_refusals.cmake)
