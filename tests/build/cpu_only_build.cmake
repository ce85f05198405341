# Builds Lockstep a second time with the CUDA backend switched off (as on a machine without
# nvcc) and checks that the result works and explains itself when asked for a GPU:
#   cmake -DSOURCE_DIR=... -DBINARY_DIR=... [-DJOBS=N] -P cpu_only_build.cmake
# (make cpu-only-check). The CUDA build never compiles the CPU-only fallbacks (core/cuda/api.h),
# so without a CPU-only build they could rot unnoticed; in .ci/run, make sanitize's build, which
# is CPU only, runs the same checks (tools/sanitize.sh).
if(NOT DEFINED JOBS)
  set(JOBS 2)
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${BINARY_DIR} -DLOCKSTEP_WITH_CUDA=OFF
                        -DLOCKSTEP_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=Release
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "configuring the CPU-only build failed:\n${out}${err}")
endif()
if(NOT out MATCHES "building for the CPU only")
  message(FATAL_ERROR "the CPU-only configuration still enabled CUDA:\n${out}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BINARY_DIR} --target chapter1 chapter2 --parallel ${JOBS}
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "building the CPU-only build failed:\n${out}${err}")
endif()
execute_process(COMMAND ${BINARY_DIR}/chapter2 --device cuda --max-steps 1
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(status EQUAL 0 OR NOT "${out}${err}" MATCHES "Lockstep was built without CUDA")
  message(FATAL_ERROR "CPU-only chapter2 --device cuda should fail with 'built without CUDA', got status ${status}:\n${out}${err}")
endif()
set(cuda_refusal "${err}")
execute_process(COMMAND ${BINARY_DIR}/chapter1 --size=128 RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL 0 OR NOT out MATCHES "\nRESULT chapter=1 ")
  message(FATAL_ERROR "CPU-only chapter1 did not complete:\n${out}${err}")
endif()
message("CPU-only build: chapter1 runs, chapter2 --device cuda says: ${cuda_refusal}")
