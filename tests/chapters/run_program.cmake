# Runs a program and checks its exit status and output.
#   cmake -DPROGRAM=path "-DARGS=--a;--b" -DEXPECT=success|failure "-DMATCH=regex" -P run_program.cmake
# EXPECT=failure means a normal non-zero exit (an error message), not a crash by a signal.
execute_process(COMMAND ${PROGRAM} ${ARGS} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(EXPECT STREQUAL "success" AND NOT status EQUAL 0)
  message(FATAL_ERROR "${PROGRAM} exited with status '${status}', expected success")
endif()
if(EXPECT STREQUAL "failure" AND (status EQUAL 0 OR NOT status MATCHES "^[0-9]+$"))
  message(FATAL_ERROR "${PROGRAM} ended with '${status}', expected a clean non-zero exit with a message")
endif()
if(DEFINED MATCH AND NOT "${out}${err}" MATCHES "${MATCH}")
  message(FATAL_ERROR "${PROGRAM}'s output does not match '${MATCH}'")
endif()
