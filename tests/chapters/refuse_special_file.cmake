# Makes a path that is not a regular file, runs a program that is given it, and checks that the
# program refuses it at once with exit status 1 and leaves it as it was:
#   cmake -DPROGRAM=path -DKIND=fifo|null|full -DNAME=name "-DARGS=--a;<special>" "-DMATCH=regex"
#         -P refuse_special_file.cmake
# MATCH must match the program's whole last line on stderr, its error message.
# The path is special-files/NAME in the working folder: a FIFO (mkfifo), or a character device
# node like /dev/null (null) or /dev/full (full). Making a node needs root; without it the
# machine's own /dev/null or /dev/full stands in, which a user who cannot make nodes cannot
# replace either (as root, the test's own node keeps a wrong save from replacing the machine's).
# "<special>" in ARGS and MATCH stands for the path. A program that waits on the path (a FIFO's
# open blocks until the other end opens it) is stopped after 20 s and the test fails.
file(MAKE_DIRECTORY special-files)
set(special special-files/${NAME})
file(REMOVE ${special} ${special}.tmp)
if(KIND STREQUAL "fifo")
  execute_process(COMMAND mkfifo ${special} RESULT_VARIABLE made)
  set(test_flag -p)
  set(what "a FIFO")
  if(NOT made EQUAL 0)
    message(FATAL_ERROR "mkfifo ${special} failed (${made})")
  endif()
else()
  set(minor_of_null 3)
  set(minor_of_full 7)
  execute_process(COMMAND mknod ${special} c 1 ${minor_of_${KIND}} RESULT_VARIABLE made ERROR_QUIET)
  set(test_flag -c)
  set(what "a character device")
  if(NOT made EQUAL 0)
    set(special /dev/${KIND})
  endif()
endif()

string(REPLACE "<special>" "${special}" args "${ARGS}")
string(REPLACE "<special>" "${special}" match "${MATCH}")
execute_process(COMMAND ${PROGRAM} ${args} TIMEOUT 20 RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT status STREQUAL "1")
  message(FATAL_ERROR "${PROGRAM} ended with '${status}', expected exit status 1 at once")
endif()
string(STRIP "${err}" err)
string(REGEX MATCH "[^\n]*$" last_line "${err}")
if(NOT last_line MATCHES "^${match}$")
  message(FATAL_ERROR "${PROGRAM}'s last line on stderr is not '${match}'")
endif()
execute_process(COMMAND test ${test_flag} ${special} RESULT_VARIABLE still)
if(NOT still EQUAL 0)
  message(FATAL_ERROR "${special} is no longer ${what} (test ${test_flag} failed): the program replaced it")
endif()
if(EXISTS ${special}.tmp)
  message(FATAL_ERROR "${special}.tmp was left behind")
endif()
if(special MATCHES "^special-files/")
  file(REMOVE ${special})
endif()
