# Chapter 6's checkpoints at the end of an epoch, where the sampler has no batch of it left.
# Runs, with MPIRUN "-n 2" and PROGRAM chapter6, EPOCH_STEPS the steps of one epoch:
#   1. two whole epochs: checksum A;
#   2. one epoch, a checkpoint at its last step;
#   3. a new job resuming from it for the second epoch, writing a checkpoint at its end: A again;
#   4. the finished job submitted again, resuming from that last checkpoint: it says there is
#      nothing left to train, evaluates, and exits 0 with A; given another --lr, it says that
#      the checkpoint's rate is the one used.
# (A resume from the end of an epoch used to stop on "tensor is undefined".)
#   cmake -DMPIRUN=... -DPROGRAM=... -DDIR=... -DEPOCH_STEPS=7 "-DEXTRA=--data ..." -P resume_at_epoch_end.cmake
separate_arguments(extra UNIX_COMMAND "${EXTRA}")
set(common --device cpu --threads 1 --epochs 2 ${extra})
function(run_job label out_var)
  execute_process(COMMAND ${MPIRUN} -n 2 ${PROGRAM} ${common} ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE out
                  ERROR_VARIABLE err TIMEOUT 240)
  message("--- ${label} (status ${status})\n${out}${err}")
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${label}: the job failed")
  endif()
  if(NOT "${out}" MATCHES "RESULT chapter=6 [^\n]* checksum=([0-9a-f]+)")
    message(FATAL_ERROR "${label}: no RESULT line with a checksum")
  endif()
  set(${out_var} "${out}" PARENT_SCOPE)
  set(${out_var}_checksum ${CMAKE_MATCH_1} PARENT_SCOPE)
endfunction()
function(expect_checksum label got want)
  if(NOT got STREQUAL want)
    message(FATAL_ERROR "${label}: checksum ${got}, the two whole epochs ended with ${want}")
  endif()
endfunction()

set(first ${DIR}/epoch-end-first.safetensors)
set(last ${DIR}/epoch-end-last.safetensors)
file(REMOVE ${first} ${last})
run_job("two whole epochs" whole)
run_job("the first epoch, saved at its end" first_epoch --max-steps ${EPOCH_STEPS} --save-every ${EPOCH_STEPS}
        --checkpoint ${first})
math(EXPR all_steps "2 * ${EPOCH_STEPS}")
run_job("resumed from the end of epoch 1" second_epoch --resume ${first} --save-every ${all_steps} --checkpoint ${last})
expect_checksum("resumed from the end of epoch 1" "${second_epoch_checksum}" "${whole_checksum}")
run_job("the finished job again, with another --lr" again --resume ${last} --lr 0.2)
if(NOT again MATCHES "nothing left to train: the checkpoint is at step ${all_steps}, epoch 2, and the run ends at --epochs 2")
  message(FATAL_ERROR "the finished job submitted again did not say that nothing was left to train")
endif()
if(NOT again MATCHES "note: --lr 0.2 differs from the checkpoint's [0-9.]+: the checkpoint's is used")
  message(FATAL_ERROR "the resumed job did not say that the checkpoint's learning rate overrides --lr")
endif()
expect_checksum("the finished job again" "${again_checksum}" "${whole_checksum}")
message("two whole epochs, the second resumed, the finished job again: checksum ${whole_checksum} each time")
