# Exercises: chapters/chNN_topic/exercises/<name>/ holds starter.cpp (the file a student
# edits), solution.cpp (the reference), test.cpp (GoogleTest) and README.md (the text). The
# exercise is called chNN_<name>. For each one this file builds two test programs, both from
# test.cpp:
#   exercise_chNN_<name>           with the student's file: starter.cpp, or the file in the
#                                  cache variable LOCKSTEP_EXERCISE_FILE_chNN_<name>
#                                  (`make exercise EX=chNN_<name> FILE=path` sets it);
#   exercise_chNN_<name>_solution  with solution.cpp;
# a target check_exercise_chNN_<name> that builds and runs the student's program (what
# `make exercise` runs), grade_exercise_chNN_<name> the same run ending in the score of passed
# test cases (what `make grade` runs), and two CTest tests (label exercise), so that CI tests
# the tests:
#   exercise_chNN_<name>_solution       the test passes against the reference solution;
#   exercise_chNN_<name>_starter_fails  every test fails against starter.cpp (gtest's summary
#                                       says "[  PASSED  ] 0 tests.")
#                                       (registered while the student's file is starter.cpp).
# An exercise whose folder has an exercise.cmake setting EXERCISE_MPI_RANKS runs under
# `mpirun -n EXERCISE_MPI_RANKS` with the MPI tests' main (tests/mpi/mpi_test_main.cpp), and
# only where CMake found MPI; the others link gtest's main. A new exercise needs no edit here.
#
# A student's handout (`make handout`) has no solution.cpp. There each exercise gets one CTest
# test instead of the two, exercise_chNN_<name>, which passes once every test case passes with
# the student's file and is otherwise skipped with "not yet solved (K of N test cases pass)"
# (tools/exercise_score.sh): an exercise not done yet is not a failing build.
find_package(GTest REQUIRED)

file(GLOB EXERCISE_TESTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/chapters/ch*/exercises/*/test.cpp)
foreach(exercise_test ${EXERCISE_TESTS})
  get_filename_component(exercise_dir ${exercise_test} DIRECTORY)
  get_filename_component(exercise_name ${exercise_dir} NAME)
  string(REGEX REPLACE ".*/chapters/(ch[0-9]+)_[^/]*/exercises/.*" "\\1" chapter ${exercise_dir})
  set(exercise ${chapter}_${exercise_name})

  unset(EXERCISE_MPI_RANKS)
  if(EXISTS ${exercise_dir}/exercise.cmake)
    include(${exercise_dir}/exercise.cmake)
  endif()
  if(DEFINED EXERCISE_MPI_RANKS AND NOT LOCKSTEP_MPI)
    add_test(NAME exercise_${exercise}_solution
             COMMAND sh -c "echo 'MPI was not found when CMake ran: exercise ${exercise} is skipped'; exit 77")
    set_tests_properties(exercise_${exercise}_solution PROPERTIES LABELS exercise SKIP_RETURN_CODE 77)
    continue()
  endif()

  set(LOCKSTEP_EXERCISE_FILE_${exercise} ${exercise_dir}/starter.cpp CACHE FILEPATH
      "The student's file for exercise ${exercise} (make exercise EX=${exercise} FILE=path)")
  set(variants student)
  if(EXISTS ${exercise_dir}/solution.cpp)
    list(APPEND variants solution)
  endif()
  foreach(variant ${variants})
    if(variant STREQUAL student)
      set(target exercise_${exercise})
      set(source ${LOCKSTEP_EXERCISE_FILE_${exercise}})
    else()
      set(target exercise_${exercise}_solution)
      set(source ${exercise_dir}/solution.cpp)
    endif()
    if(DEFINED EXERCISE_MPI_RANKS)
      add_executable(${target} ${exercise_test} ${source} ${CMAKE_CURRENT_SOURCE_DIR}/tests/mpi/mpi_test_main.cpp)
      target_link_libraries(${target} PRIVATE lockstep GTest::gtest)
      set(command_${variant} ${CMAKE_COMMAND} -E env ${MPI_TEST_ENVIRONMENT} ${MPIEXEC_EXECUTABLE}
          ${MPIEXEC_NUMPROC_FLAG} ${EXERCISE_MPI_RANKS} ${MPIEXEC_PREFLAGS} $<TARGET_FILE:${target}>)
    else()
      add_executable(${target} ${exercise_test} ${source})
      target_link_libraries(${target} PRIVATE lockstep GTest::gtest_main)
      set(command_${variant} $<TARGET_FILE:${target}>)
    endif()
    # Tests include the library's test helpers, e.g. "unit/gradcheck.h".
    target_include_directories(${target} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/tests)
  endforeach()

  add_custom_target(check_exercise_${exercise} COMMAND ${command_student} DEPENDS exercise_${exercise}
                    COMMENT "Exercise ${exercise} against ${LOCKSTEP_EXERCISE_FILE_${exercise}}" USES_TERMINAL VERBATIM)
  # make grade: the same run, ending in the score (tools/exercise_score.sh).
  add_custom_target(grade_exercise_${exercise}
                    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/tools/exercise_score.sh grade ${exercise} ${command_student}
                    DEPENDS exercise_${exercise} USES_TERMINAL VERBATIM)
  if(NOT EXISTS ${exercise_dir}/solution.cpp)
    # A handout: solved, or skipped as not yet solved.
    add_test(NAME exercise_${exercise}
             COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/tools/exercise_score.sh status ${exercise} ${command_student})
    set_tests_properties(exercise_${exercise} PROPERTIES LABELS exercise TIMEOUT 120 SKIP_RETURN_CODE 77)
    continue()
  endif()
  add_test(NAME exercise_${exercise}_solution COMMAND ${command_solution})
  set_tests_properties(exercise_${exercise}_solution PROPERTIES LABELS exercise TIMEOUT 120)
  if(LOCKSTEP_EXERCISE_FILE_${exercise} STREQUAL ${exercise_dir}/starter.cpp)
    # Passes only when gtest's summary says that no test passed: a crash or a build error does
    # not count (plain text: under mpirun gtest may colour its lines).
    add_test(NAME exercise_${exercise}_starter_fails COMMAND ${command_student} --gtest_color=no)
    set_tests_properties(exercise_${exercise}_starter_fails PROPERTIES LABELS exercise TIMEOUT 120
                         PASS_REGULAR_EXPRESSION "\\[  PASSED  \\] 0 tests\\.")
  endif()
endforeach()

# The course kit is tested too (label exercise). exercise_score_grades: tools/exercise_score.sh
# gives ch01_softplus's starter a score of 0 and its solution a full one, and calls the starter
# "not yet solved" (CTest's skip code, 77). handout_leaves_out_solutions: `make handout` writes a copy
# without solutions or answer keys, which CMake configures into one test per exercise, each
# registered as a handout's (no _solution tests).
if(TARGET exercise_ch01_softplus_solution AND LOCKSTEP_EXERCISE_FILE_ch01_softplus MATCHES "/starter\\.cpp$")
  set(score ${CMAKE_CURRENT_SOURCE_DIR}/tools/exercise_score.sh)
  add_test(NAME exercise_score_grades
           COMMAND sh -c "sh ${score} grade ch01_softplus $<TARGET_FILE:exercise_ch01_softplus> | tail -n 1; \
sh ${score} grade ch01_softplus $<TARGET_FILE:exercise_ch01_softplus_solution> | tail -n 1; \
sh ${score} status ch01_softplus $<TARGET_FILE:exercise_ch01_softplus> | tail -n 1; \
sh ${score} status ch01_softplus $<TARGET_FILE:exercise_ch01_softplus> >/dev/null; echo \"status exit $?\"")
  set_tests_properties(exercise_score_grades PROPERTIES LABELS exercise PASS_REGULAR_EXPRESSION
    "ch01_softplus: score 0/4 [^\n]*\nch01_softplus: score 4/4 [^\n]*\nch01_softplus: not yet solved \\(0 of 4 test cases pass\\)[^\n]*\nstatus exit 77")
endif()
set(handout ${CMAKE_CURRENT_BINARY_DIR}/handout-check)
add_test(NAME handout_leaves_out_solutions
         COMMAND sh -c "rm -rf ${handout} && sh ${CMAKE_CURRENT_SOURCE_DIR}/tools/make_handout.sh ${handout} && \
if find ${handout} -name solution.cpp | grep -q . || [ -e ${handout}/course/answers ]; then echo 'a solution was copied'; exit 1; fi && \
cmake -S ${handout} -B ${handout}/build -DLOCKSTEP_WITH_CUDA=OFF >/dev/null && \
(cd ${handout}/build && ctest -N -L exercise) && rm -rf ${handout}")
set_tests_properties(handout_leaves_out_solutions PROPERTIES LABELS exercise TIMEOUT 300
  PASS_REGULAR_EXPRESSION "wrote [0-9]+ files.*Test +#[0-9]+: exercise_ch01_softplus\n.*Test +#[0-9]+: exercise_ch07_updates_per_epoch\n"
  FAIL_REGULAR_EXPRESSION "exercise_ch[0-9]+_[a-z0-9_]+_(solution|starter_fails)|a solution was copied")
