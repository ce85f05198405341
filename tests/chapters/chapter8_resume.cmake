# Chapter 8's sharded checkpoints in a job (cmake -DMPIRUN="mpirun;-n" "-DRUN=chapter8;--flags"
# -DDIR=folder -P chapter8_resume.cmake): 2 ranks train 2 steps and save, then 2 ranks resume to
# step 4 and end with the weights of 4 uninterrupted steps, bit for bit; 3 ranks resume the same
# checkpoint, resharded, and go on from its data position.
file(REMOVE_RECURSE ${DIR})
function(run ranks out)
  execute_process(COMMAND ${MPIRUN} ${ranks} ${RUN} ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE output
                  ERROR_VARIABLE errors TIMEOUT 200)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${ranks} ranks of ${RUN} ${ARGN} failed (${status}):\n${output}${errors}")
  endif()
  string(REGEX MATCH "weights checksum [0-9a-f]+" sum "${output}")
  set(${out} "${sum}" PARENT_SCOPE)
  set(${out}_text "${output}" PARENT_SCOPE)
endfunction()
run(2 whole --max-steps 4)
run(2 saved --max-steps 2 --save-every 2 --checkpoint ${DIR})
run(2 resumed --max-steps 4 --resume ${DIR})
if(NOT resumed STREQUAL whole)
  message(FATAL_ERROR "resumed to '${resumed}', the uninterrupted run ends at '${whole}':\n${resumed_text}")
endif()
run(3 three --max-steps 4 --resume ${DIR})
if(NOT three_text MATCHES "note: saved by 2 ranks, resumed by 3: parameters and optimizer state resharded; the epoch resumes after its first 16 samples.*RESULT chapter=8 .*world=3 .*steps=4 ")
  message(FATAL_ERROR "3 ranks did not resume the 2 ranks' checkpoint:\n${three_text}")
endif()
message("2 ranks resumed bit for bit (${whole}); 3 ranks resumed resharded")
