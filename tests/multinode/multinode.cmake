# Chapter 6's two nodes on one machine (CTest label multinode), included by tests/CMakeLists.txt:
# a DDP program trained with one rank in each of two network namespaces, mpirun reaching the
# second "node" through tools/netns-rsh and the ranks talking TCP over a bridge, must end with
# the same weights as `mpirun -n 2` on one node (tests/multinode/two_nodes.sh says how). Needs
# root (or CAP_NET_ADMIN and CAP_SYS_ADMIN) and the `ip` command (Debian: iproute2); skipped
# (exit 77) without them. Also builds the probe of tests/bench/ring_cost_model.sh.
set(LOCKSTEP_MULTINODE_DIR ${CMAKE_CURRENT_LIST_DIR})

if(LOCKSTEP_MPI)
  # lockstep_multinode_test(NAME PROGRAM ARGS...): PROGRAM ARGS on two nodes against one node.
  # Chapter 6 adds its own with one line, e.g.
  #   lockstep_multinode_test(multinode_chapter6_two_nodes chapter6 --device cpu --max-steps 20 --threads 1)
  function(lockstep_multinode_test name program)
    add_test(NAME ${name}
             COMMAND bash ${LOCKSTEP_MULTINODE_DIR}/two_nodes.sh ${MPIEXEC_EXECUTABLE} $<TARGET_FILE:${program}> ${ARGN})
    # The script limits each of its two runs to 50 s and cleans up after itself; CTest's limit is
    # a last resort (its kill leaves the namespaces to the next run's sweep).
    set_tests_properties(${name} PROPERTIES LABELS multinode SKIP_RETURN_CODE 77 TIMEOUT 150
                         ENVIRONMENT "${MPI_TEST_ENVIRONMENT}")
  endfunction()
  # One thread per rank: both runs then use the machine's cores alike (the weights do not depend
  # on the thread count), and the two-node run does not put each node's default of all cores on
  # the same cores twice.
  lockstep_multinode_test(multinode_chapter4_two_nodes chapter4 --device cpu --max-steps 20 --threads 1)
  lockstep_multinode_test(multinode_chapter6_two_nodes chapter6 --device cpu --max-steps 10 --threads 1)

  # tests/bench/ring_cost_model.sh's measurement of the link: raw MPI_Allreduce times by size.
  add_executable(ring_cost_model ${CMAKE_SOURCE_DIR}/tests/bench/ring_cost_model.cpp)
  target_link_libraries(ring_cost_model PRIVATE MPI::MPI_CXX)
endif()
