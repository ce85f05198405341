# Runs a program and checks its exit status and output.
#   cmake -DPROGRAM=path "-DARGS=--a;--b" -DEXPECT=success|failure "-DMATCH=regex" -P run_program.cmake
# EXPECT=failure means a normal non-zero exit (an error message), not a crash by a signal.
# Optional: -DTIMES=n, MATCH must match n times (once per rank of a job); -DAT_LEAST=n, at
# least n times (under mpirun, which ends the job at the first rank's non-zero exit and can
# then drop the last lines the other ranks wrote, though they wrote them); "-DFORBID=regex",
# output that must not appear (a rank's abort under mpirun, which mpirun's own status hides).
# -DNEEDS=path "-DSKIP=reason": where `path` does not exist, the program is not run and the test
# prints "SKIP: reason" (the test's SKIP_REGULAR_EXPRESSION makes CTest count it as skipped).
if(DEFINED NEEDS AND NOT EXISTS "${NEEDS}")
  message("SKIP: ${SKIP}")
  return()
endif()
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
if(DEFINED TIMES)
  # Each match becomes a token, counted as a list without the ';' a matched text may hold.
  string(REGEX REPLACE "${MATCH}" "<match>" marked "${out}${err}")
  string(REGEX MATCHALL "<match>" matches "${marked}")
  list(LENGTH matches found)
  if(NOT found EQUAL TIMES)
    message(FATAL_ERROR "${PROGRAM}'s output matches '${MATCH}' ${found} time(s), expected ${TIMES}")
  endif()
endif()
if(DEFINED AT_LEAST)
  string(REGEX REPLACE "${MATCH}" "<match>" marked "${out}${err}")
  string(REGEX MATCHALL "<match>" matches "${marked}")
  list(LENGTH matches found)
  if(found LESS AT_LEAST)
    message(FATAL_ERROR "${PROGRAM}'s output matches '${MATCH}' ${found} time(s), expected at least ${AT_LEAST}")
  endif()
endif()
if(DEFINED FORBID AND "${out}${err}" MATCHES "${FORBID}")
  message(FATAL_ERROR "${PROGRAM}'s output has '${CMAKE_MATCH_0}', which a clean exit never prints")
endif()
