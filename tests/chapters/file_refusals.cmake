# Paths the programs are given that are not regular files, and data files that differ between
# ranks. A FIFO (named pipe) given to --load, --resume, --save, --trace or --metrics used to
# block the program forever in open(); a device node given to --save or --checkpoint was replaced
# by a regular file. Each is refused before any data is loaded, with exit status 1, and left as
# it was (refuse_special_file.cmake makes it in the test's working folder). Included by
# chapter_tests.cmake, after mpirun.cmake.

# lockstep_special_file_test(NAME PROGRAM KIND MATCH ARGS...): PROGRAM given ARGS, in which
# <special> stands for a path of KIND (fifo, null or full), must refuse it with MATCH, its
# whole last line on stderr.
function(lockstep_special_file_test name program kind match)
  add_test(NAME ${name}
           COMMAND ${CMAKE_COMMAND} "-DPROGRAM=$<TARGET_FILE:${program}>" -DKIND=${kind} -DNAME=${name}
                   "-DARGS=${ARGN}" "-DMATCH=${match}" -P ${CMAKE_CURRENT_LIST_DIR}/refuse_special_file.cmake
           WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  # Short: a refusal comes before any data is read, and a regression that blocks must not hold
  # up the test run.
  set_tests_properties(${name} PROPERTIES LABELS chapter TIMEOUT 30)
endfunction()

set(fifo_refusal "this is a FIFO \\(named pipe\\); name a regular file to")
set(device_refusal "this is a character device; name a regular file to write")
lockstep_special_file_test(chapter2_refuses_a_fifo_to_load chapter2 fifo
                           "chapter2: error: --load <special>: ${fifo_refusal} read" --model mlp --load <special>)
lockstep_special_file_test(chapter2_refuses_a_device_to_save chapter2 null
                           "chapter2: error: --save <special>: ${device_refusal}" --model mlp --max-steps 1
                           --save <special>)
lockstep_special_file_test(chapter4_refuses_a_fifo_to_trace chapter4 fifo
                           "chapter4: error: --trace <special>: ${fifo_refusal} write" --model mlp --trace <special>)
lockstep_special_file_test(chapter5_refuses_a_fifo_for_metrics chapter5 fifo
                           "chapter5: error: --metrics <special>: ${fifo_refusal} write" --model mlp --metrics <special>)
lockstep_special_file_test(chapter6_refuses_a_fifo_to_resume chapter6 fifo
                           "chapter6: error: --resume <special>: ${fifo_refusal} read" --model mlp --resume <special>)
lockstep_special_file_test(chapter6_refuses_a_device_as_checkpoint chapter6 full
                           "chapter6: error: --checkpoint <special>: ${device_refusal}" --model mlp --max-steps 1
                           --save-every 1 --checkpoint <special>)

# Ranks agree on the data's contents, not only its sizes: one rank's copy of the made-up CIFAR-10
# holds a different data_batch_3.bin of the same size (chapter_tests.cmake's image-alike records
# in place of the varied ones), and every rank stops at start, naming the data.
if(LOCKSTEP_MPI)
  set(OTHER_CIFAR ${CMAKE_CURRENT_BINARY_DIR}/varied-cifar10-one-file-differs)
  foreach(name data_batch_1 data_batch_2 data_batch_4 data_batch_5 test_batch)
    file(WRITE ${OTHER_CIFAR}/${name}.bin "${varied_records}")
  endforeach()
  file(WRITE ${OTHER_CIFAR}/data_batch_3.bin "${twenty_records}")
  foreach(program chapter4 chapter5 chapter6)
    set(run $<TARGET_FILE:${program}> --device cpu --model resnet --dataset cifar10 --batch-size 4 --max-steps 1)
    lockstep_mpirun_refusal_test(${program}_ranks_disagree_on_the_data_files
      "${program}: error: the ranks were given different --data .files' contents.: rank 0 has [0-9a-f]+, rank 1 has [0-9a-f]+; every rank must be started with the same value"
      ${MPIEXEC_NUMPROC_FLAG} 1 ${run} --data ${VARIED_CIFAR} : ${MPIEXEC_NUMPROC_FLAG} 1 ${run} --data ${OTHER_CIFAR})
  endforeach()
endif()
