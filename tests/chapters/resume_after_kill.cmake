# Chapter 6's promise: a job killed mid-run and resumed from its last checkpoint ends with the
# weights of a job that was never interrupted. Runs, with MPIRUN "-n 2" and PROGRAM chapter6:
#   1. the whole run (STEPS steps, a checkpoint every EVERY steps): checksum A;
#   2. the same run with rank 1 killed (SIGKILL) before step KILL_AT: must fail;
#   3. a new job resuming from the checkpoint of step 2: checksum B.
# A == B, bitwise. The checkpoint of run 2 must have survived the kill intact.
#   cmake -DMPIRUN=... -DPROGRAM=... -DDIR=... -DSTEPS=8 -DEVERY=4 -DKILL_AT=6 -P resume_after_kill.cmake
# EXTRA: more flags for all three jobs, in one string ("--warmup-epochs 1": a
# learning rate that changes every step, from the scheduler the checkpoint restores); NAME: a
# prefix for the checkpoint files, so that two such tests may run at once.
separate_arguments(extra UNIX_COMMAND "${EXTRA}")
set(common --device cpu --threads 1 --max-steps ${STEPS} --save-every ${EVERY} ${extra})
function(run_job label expect_success out_var)
  execute_process(COMMAND ${MPIRUN} -n 2 ${PROGRAM} ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE out
                  ERROR_VARIABLE err TIMEOUT 240)
  message("--- ${label} (status ${status})\n${out}${err}")
  if(expect_success AND NOT status EQUAL 0)
    message(FATAL_ERROR "${label}: the job failed")
  elseif(NOT expect_success AND status EQUAL 0)
    message(FATAL_ERROR "${label}: the job succeeded although rank 1 was killed")
  endif()
  set(${out_var} "${out}${err}" PARENT_SCOPE)
endfunction()
function(checksum_of text out_var)
  if(NOT text MATCHES "RESULT chapter=6 [^\n]* checksum=([0-9a-f]+)")
    message(FATAL_ERROR "no RESULT line with a checksum")
  endif()
  set(${out_var} ${CMAKE_MATCH_1} PARENT_SCOPE)
endfunction()

set(whole_file ${DIR}/${NAME}whole.safetensors)
set(killed_file ${DIR}/${NAME}killed.safetensors)
file(REMOVE ${whole_file} ${killed_file})
run_job("the whole run" TRUE whole ${common} --checkpoint ${whole_file})
checksum_of("${whole}" want)
run_job("killed at step ${KILL_AT}" FALSE killed ${common} --checkpoint ${killed_file}
        --fault kill --fault-step ${KILL_AT})
run_job("resumed" TRUE resumed ${common} --checkpoint ${killed_file} --resume ${killed_file})
if(NOT resumed MATCHES "resumed from [^\n]*: epoch 1, ${EVERY} micro-batch.es. of it done, step ${EVERY} .bit-exact.")
  message(FATAL_ERROR "the resumed job did not report resuming bit-exactly at step ${EVERY}")
endif()
checksum_of("${resumed}" got)
message("whole run: checksum ${want}; killed and resumed: checksum ${got}")
if(NOT want STREQUAL got)
  message(FATAL_ERROR "the resumed run ended with other weights than the whole run")
endif()
