# Run after each build of unit_tests (cmake -P, from tests/CMakeLists.txt): lists the binary's
# test suites (--gtest_list_tests) and writes OUT, a CTest file with one test per suite,
# `unit_tests --gtest_filter=Suite.*`, labelled unit. A suite is one process: a process per
# test would load the CUDA libraries the binary links once per test, which took most of the
# unit tests' time. A test that skips (GTEST_SKIP) says so in its suite's output.
# Inputs: -DTEST_EXECUTABLE=path -DOUT=file
execute_process(COMMAND ${TEST_EXECUTABLE} --gtest_list_tests
                OUTPUT_VARIABLE listing ERROR_VARIABLE errors RESULT_VARIABLE status TIMEOUT 60)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "${TEST_EXECUTABLE} --gtest_list_tests failed (${status}): ${errors}")
endif()
string(REPLACE "\n" ";" lines "${listing}")
set(tests "")
foreach(line IN LISTS lines)
  # A suite's line starts in column 0 and ends its name with '.'; a typed or parametrised
  # suite adds "  # TypeParam = ..." or a prefix ("Formats/Ops16bit.").
  if(line MATCHES "^([A-Za-z_][A-Za-z0-9_/]*)\\.( .*)?$")
    set(suite ${CMAKE_MATCH_1})
    string(APPEND tests "add_test([=[${suite}]=] [=[${TEST_EXECUTABLE}]=] [=[--gtest_filter=${suite}.*]=])\n"
                        "set_tests_properties([=[${suite}]=] PROPERTIES LABELS unit TIMEOUT 600)\n")
  endif()
endforeach()
if(tests STREQUAL "")
  message(FATAL_ERROR "${TEST_EXECUTABLE} lists no test suite")
endif()
file(WRITE ${OUT} "${tests}")
