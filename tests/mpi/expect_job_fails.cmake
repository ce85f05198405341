# Runs COMMAND (a list: mpirun and its arguments) and passes if it ends with a non-zero status
# within 60 seconds; a job that hangs is killed at 60 s and fails the test.
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
message("${out}${err}")
if(status MATCHES "timeout")
  message(FATAL_ERROR "the job was still running after 60 s: a failing rank left the others waiting")
elseif(status EQUAL 0)
  message(FATAL_ERROR "the job succeeded although rank 1 failed")
endif()
if(NOT err MATCHES "rank 1 fails on purpose")
  message(FATAL_ERROR "rank 1's error message is missing from the output")
endif()
message("the job ended with status ${status}, as it should")
