# Runs one chapter program and checks that it succeeded and printed its RESULT line.
# Usage: cmake -DPROGRAM=path -DARGS="--flag;--flag" -P run_chapter.cmake
execute_process(COMMAND ${PROGRAM} ${ARGS} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT status EQUAL 0)
  message(FATAL_ERROR "${PROGRAM} exited with status ${status}")
endif()
if(NOT out MATCHES "\nRESULT chapter=[0-9]+ ")
  message(FATAL_ERROR "${PROGRAM} did not print a 'RESULT chapter=N ...' line")
endif()
