# Runs two programs and requires the last weight checksum each prints ("checksum <16 hex
# digits>") to be the same: two ways of training that must give the same bits.
#   cmake "-DFIRST=prog;--a" "-DSECOND=prog;--b" -P compare_checksums.cmake
foreach(run FIRST SECOND)
  execute_process(COMMAND ${${run}} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${${run}} exited with status '${status}':\n${out}${err}")
  endif()
  string(REGEX MATCHALL "checksum [0-9a-f]+" sums "${out}")
  if(NOT sums)
    message(FATAL_ERROR "${${run}} printed no checksum:\n${out}${err}")
  endif()
  list(GET sums -1 ${run}_SUM)
endforeach()
if(NOT FIRST_SUM STREQUAL SECOND_SUM)
  message(FATAL_ERROR "the runs disagree: '${FIRST_SUM}' from ${FIRST}, '${SECOND_SUM}' from ${SECOND}")
endif()
message("both runs end with ${FIRST_SUM}")
