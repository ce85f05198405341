# The chapter programs under mpirun (labels chapter and mpi): ranks that stay in lockstep, that
# refuse to start with different settings, that end the job with the fault lab's messages, and
# chapter 6's checkpoints read back and resumed across ranks. Included by chapter_tests.cmake
# when MPI was found.

# lockstep_mpirun_test(NAME RANKS MATCH ARGS ...): `mpirun -n RANKS ARGS...` must succeed and
# print output matching MATCH (labels chapter and mpi).
function(lockstep_mpirun_test name ranks match)
  add_test(NAME ${name}
           COMMAND ${CMAKE_COMMAND} "-DPROGRAM=${MPIEXEC_EXECUTABLE}" "-DARGS=${MPIEXEC_NUMPROC_FLAG};${ranks};${ARGN}"
                   -DEXPECT=success "-DMATCH=${match}" -P ${RUN_PROGRAM})
  set_tests_properties(${name} PROPERTIES LABELS "chapter;mpi" TIMEOUT 300 ENVIRONMENT "${MPI_TEST_ENVIRONMENT}")
endfunction()

# What only an abort prints: a rank's C++ runtime ending it ("terminate called"), MPI_Abort's
# banner, or mpirun naming a rank killed by a signal.
set(NOT_AN_ABORT "terminate called|MPI_ABORT was invoked|exited on signal")

# lockstep_mpirun_refusal_test(NAME MATCH ARGS...): `mpirun ARGS...` (ARGS name the ranks,
# e.g. "-n;1;prog;--a;:;-n;1;prog;--b") must end with a clean non-zero exit on both ranks:
# each prints MATCH (an error every rank reaches together, AgreedError), none aborts. Every
# rank writes MATCH before any rank exits (they leave MPI together), but mpirun, ending the job
# at the first non-zero exit, now and then drops the other's last lines: at least one is asked.
function(lockstep_mpirun_refusal_test name match)
  add_test(NAME ${name}
           COMMAND ${CMAKE_COMMAND} "-DPROGRAM=${MPIEXEC_EXECUTABLE}" "-DARGS=${ARGN}" -DEXPECT=failure
                   "-DMATCH=${match}" -DAT_LEAST=1 "-DFORBID=${NOT_AN_ABORT}" -P ${RUN_PROGRAM})
  set_tests_properties(${name} PROPERTIES LABELS "chapter;mpi" TIMEOUT 120 ENVIRONMENT "${MPI_TEST_ENVIRONMENT}")
endfunction()

# Ranks started with different settings (mpirun's "A : B" starts one rank of each): the job
# ends at start, on every rank, naming the setting and each rank's value, where it used to
# hang (batch size, step limit, --trace on one rank), crash (bucket caps) or train on
# overlapping shards (seed). chapters/common/settings_agreement.h.
function(lockstep_mpirun_disagreement_test name program match flag first second)
  set(run $<TARGET_FILE:${program}> --device cpu --model mlp --max-steps=2)
  lockstep_mpirun_refusal_test(${name} "${match}" ${MPIEXEC_NUMPROC_FLAG} 1 ${run} ${flag} ${first} :
                               ${MPIEXEC_NUMPROC_FLAG} 1 ${run} ${flag} ${second})
endfunction()

# Chapter 4's fault lab (chapters/common/fault_lab.h): each classic failure ends the job with
# the message the chapter's "Questions users ask" quotes, within the 5 s collective timeout
# plus the 2 s the others are given to answer; --join and --find-unused-parameters fix theirs.
function(lockstep_fault_lab_test name args)
  set(run $<TARGET_FILE:chapter4> --device cpu --model mlp --collective-timeout 5 ${args})
  add_test(NAME ${name}
           COMMAND ${CMAKE_COMMAND} "-DCOMMAND=${MPIEXEC_EXECUTABLE};${MPIEXEC_NUMPROC_FLAG};2;${run}"
                   "-DMATCH=${ARGN}" -DLIMIT=40 -P ${CMAKE_CURRENT_SOURCE_DIR}/mpi/expect_job_fails.cmake)
  set_tests_properties(${name} PROPERTIES LABELS "chapter;mpi" TIMEOUT 120 ENVIRONMENT "${MPI_TEST_ENVIRONMENT}")
endfunction()

# Chapter 4 under mpirun: it stops with an error if the ranks' checksums ever differ, so a
# RESULT line means they stayed in sync; rank 0 alone saves, without the "module." prefix.
# These runs name the CPU, so that they test the MPI backend on a machine with GPUs too.
foreach(ranks 2 3)
  lockstep_mpirun_test(chapter4_mpirun_${ranks}_ranks ${ranks}
                       "saved .*chapter4-${ranks}.safetensors .keys like .0.weight.*RESULT chapter=4 model=cnn device=cpu world=${ranks} "
                       $<TARGET_FILE:chapter4> --device cpu --max-steps=30 --save ${CMAKE_CURRENT_BINARY_DIR}/chapter4-${ranks}.safetensors)
endforeach()
# The ResNet's BatchNorm buffers drift apart during an epoch (each rank updates them from its
# own batches); the program broadcasts rank 0's before its check, as DDP's next forward would.
lockstep_mpirun_test(chapter4_mpirun_resnet_buffers 2 "RESULT chapter=4 model=resnet device=cpu world=2 epochs=2 "
                     $<TARGET_FILE:chapter4> --device cpu --model resnet --dataset cifar10 --data ${VARIED_CIFAR} --batch-size 4 --epochs 2)
# An MPI job from a launcher Lockstep does not know (here: Open MPI's variables removed):
# MPI's own rank and world size are used, and the job runs.
lockstep_mpirun_test(chapter4_mpirun_unknown_launcher 2
                     "world: 2 rank.s. started by none.*RESULT chapter=4 model=cnn device=cpu world=2 "
                     env -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE -u OMPI_COMM_WORLD_LOCAL_RANK
                     -u OMPI_COMM_WORLD_LOCAL_SIZE $<TARGET_FILE:chapter4> --device cpu --max-steps=5)
# --trace: every rank's timeline merged by rank 0 into one file.
lockstep_mpirun_test(chapter4_mpirun_trace 2
                     "trace: [0-9]+ spans of 2 rank.s. written to .*chapter4-trace.json.*RESULT chapter=4 "
                     $<TARGET_FILE:chapter4> --max-steps=3 --trace ${CMAKE_CURRENT_BINARY_DIR}/chapter4-trace.json)
# --metrics: rank 0 alone writes the rows of its steps.
set(csv ${CMAKE_CURRENT_BINARY_DIR}/chapter4-metrics.csv)
add_test(NAME chapter4_metrics_2_ranks
         COMMAND ${CMAKE_COMMAND} "-DPROGRAM=${MPIEXEC_EXECUTABLE}"
                 "-DARGS=${MPIEXEC_NUMPROC_FLAG};2;$<TARGET_FILE:chapter4>;--model;mlp;--max-steps=4;--metrics;${csv}"
                 -DCSV=${csv} -DSTEPS=4 -P ${CHECK_METRICS})
set_tests_properties(chapter4_metrics_2_ranks PROPERTIES LABELS "chapter;mpi" TIMEOUT 300
                     ENVIRONMENT "${MPI_TEST_ENVIRONMENT}")

lockstep_mpirun_disagreement_test(chapter4_ranks_disagree_on_batch_size chapter4
  "different --batch-size: rank 0 has 64, rank 1 has 32; every rank must be started with the same value"
  --batch-size 64 32)
lockstep_mpirun_disagreement_test(chapter4_ranks_disagree_on_seed chapter4
  "different --seed: rank 0 has 0, rank 1 has 1;" --seed 0 1)
lockstep_mpirun_disagreement_test(chapter4_ranks_disagree_on_bucket_caps chapter4
  "different --bucket-cap-mb: rank 0 has 25, rank 1 has 0.10000000000000001;" --bucket-cap-mb 25 0.1)
lockstep_mpirun_disagreement_test(chapter4_ranks_disagree_on_tracing chapter4
  "different --trace: rank 0 has off, rank 1 has on;" --epochs 1 "1;--trace;${CMAKE_CURRENT_BINARY_DIR}/one-rank-trace.json")
lockstep_mpirun_disagreement_test(chapter5_ranks_disagree_on_amp chapter5
  "different --amp: rank 0 has bf16, rank 1 has off;" --amp bf16 off)
lockstep_mpirun_disagreement_test(chapter6_ranks_disagree_on_warmup chapter6
  "different --warmup-epochs: rank 0 has 0.5, rank 1 has 0.25; every rank must be started with the same value"
  --warmup-epochs 0.5 0.25)

# The process group's own settings, read from flags or the environment on each rank: invalid
# on every rank, on one rank only, or different between ranks. Every rank ends with the
# sentence and exit status 1 (they used to print it, then abort in MPI's progress thread).
set(mlp_run --device cpu --model mlp --max-steps=2)
set(timeout_text "LOCKSTEP_COLLECTIVE_TIMEOUT: ")
foreach(case "chapter4;abc;expected a number of seconds, got .abc. .on every rank."
             "chapter5;-1;expected a collective timeout in seconds, finite and >= 0 .0 turns the watchdog off., got -1 .on every rank."
             "chapter6;nan;expected a collective timeout in seconds, finite and >= 0 .0 turns the watchdog off., got nan .on every rank."
             "chapter4;inf;expected a collective timeout in seconds, finite and >= 0 .0 turns the watchdog off., got inf .on every rank."
             "chapter5;10s;expected a number of seconds, got .10s. .on every rank."
             "chapter6;5 ;expected a number of seconds, got .5 . .on every rank.")
  list(GET case 0 program)
  list(GET case 1 value)
  list(GET case 2 match)
  string(MAKE_C_IDENTIFIER "${value}" id)
  lockstep_mpirun_refusal_test(${program}_refuses_collective_timeout_${id} "${program}: error: .${timeout_text}${match}"
                               ${MPIEXEC_NUMPROC_FLAG} 2 env "LOCKSTEP_COLLECTIVE_TIMEOUT=${value}"
                               $<TARGET_FILE:${program}> ${mlp_run})
endforeach()
lockstep_mpirun_refusal_test(chapter4_refuses_a_timeout_variable_on_one_rank
  "chapter4: error: rank 1: .LOCKSTEP_COLLECTIVE_TIMEOUT: expected a number of seconds, got .soon."
  ${MPIEXEC_NUMPROC_FLAG} 1 $<TARGET_FILE:chapter4> ${mlp_run} : ${MPIEXEC_NUMPROC_FLAG} 1
  env LOCKSTEP_COLLECTIVE_TIMEOUT=soon $<TARGET_FILE:chapter4> ${mlp_run})
foreach(program chapter4 chapter6)
  lockstep_mpirun_refusal_test(${program}_refuses_an_unknown_debug_variable
    "${program}: error: .LOCKSTEP_DISTRIBUTED_DEBUG: expected OFF or DETAIL, got .bogus. .on every rank."
    ${MPIEXEC_NUMPROC_FLAG} 2 env LOCKSTEP_DISTRIBUTED_DEBUG=bogus $<TARGET_FILE:${program}> ${mlp_run})
endforeach()
lockstep_mpirun_refusal_test(chapter5_refuses_debug_level_info
  "chapter5: error: .LOCKSTEP_DISTRIBUTED_DEBUG: expected OFF or DETAIL, got .INFO. .on every rank."
  ${MPIEXEC_NUMPROC_FLAG} 2 env LOCKSTEP_DISTRIBUTED_DEBUG=INFO $<TARGET_FILE:chapter5> ${mlp_run})
lockstep_mpirun_refusal_test(chapter5_ranks_disagree_on_collective_timeout
  "the ranks use different collective timeouts: rank [01] has (5|60) s, rank [01] has (5|60) s; [^\n]* .use the same --collective-timeout on every rank."
  ${MPIEXEC_NUMPROC_FLAG} 1 $<TARGET_FILE:chapter5> ${mlp_run} --collective-timeout 5 : ${MPIEXEC_NUMPROC_FLAG} 1
  $<TARGET_FILE:chapter5> ${mlp_run})
lockstep_mpirun_refusal_test(chapter6_ranks_disagree_on_distributed_debug
  "the ranks use different debug levels: rank [01] has LOCKSTEP_DISTRIBUTED_DEBUG=(OFF|DETAIL), rank [01] has (OFF|DETAIL)"
  ${MPIEXEC_NUMPROC_FLAG} 1 $<TARGET_FILE:chapter6> ${mlp_run} --distributed-debug detail : ${MPIEXEC_NUMPROC_FLAG} 1
  $<TARGET_FILE:chapter6> ${mlp_run})

lockstep_fault_lab_test(chapter4_fault_freeze "--max-steps;10;--fault;freeze"
  "rank 1 did not answer: it is stopped .SIGSTOP, a debugger. or frozen; it never reached #[0-9]+"
  "watchdog: #[0-9]+ all_reduce .sum. of DDP bucket 0")
lockstep_fault_lab_test(chapter4_fault_skip_backward "--max-steps;10;--fault;skip-backward"
  "rank [01] waits in #[0-9]+ (all_gather of check_in_sync: 1 i64 elements, 16 B|all_reduce .sum. of DDP bucket 0: [0-9,]+ f32 elements, [0-9]+ KiB): not the same collective")
lockstep_fault_lab_test(chapter4_fault_skip_backward_detail "--max-steps;10;--fault;skip-backward;--distributed-debug;detail"
  "the ranks call different collectives .LOCKSTEP_DISTRIBUTED_DEBUG=DETAIL.: rank 0 calls #[0-9]+ all_reduce .sum. of DDP bucket 0: [0-9,]+ f32 elements; rank 1 calls #[0-9]+ all_gather of check_in_sync")
lockstep_fault_lab_test(chapter4_fault_uneven "--epochs;1;--fault;uneven"
  "rank [01] waits in #[0-9]+ (all_gather of check_in_sync|all_reduce .sum. of DDP bucket 0)")
lockstep_fault_lab_test(chapter4_fault_seed "--max-steps;2;--fault;seed"
  "different --seed: rank 0 has 0, rank 1 has 1")
lockstep_fault_lab_test(chapter4_fault_unused_parameter "--max-steps;2;--fault;unused-parameter"
  "2 parameter.s. received no gradient in this backward pass: unused.weight, unused.bias.*find_unused_parameters.true.")
lockstep_fault_lab_test(chapter4_fault_rank_outside_the_job "--max-steps;2;--fault;freeze;--fault-rank;2"
  "--fault-rank 2: the job has ranks 0 to 1")
lockstep_mpirun_test(chapter4_fault_uneven_with_join 2 "RESULT chapter=4 model=mlp device=cpu world=2 epochs=1 "
                     $<TARGET_FILE:chapter4> --device cpu --model mlp --epochs 1 --fault uneven --join)
lockstep_mpirun_test(chapter4_fault_unused_parameter_found 2 "RESULT chapter=4 model=mlp device=cpu world=2 "
                     $<TARGET_FILE:chapter4> --device cpu --model mlp --max-steps 3 --fault unused-parameter
                     --find-unused-parameters)

# Chapter 5: an inf gradient on one rank skips the step on every rank; the ResNet's BatchNorm in
# bf16; gradients sent compressed; and with --amp off, chapter 4's training bit for bit.
lockstep_mpirun_test(chapter5_mpirun_inf_on_one_rank_skips_everywhere 2
                     "rank 1/2\\] step 4 skipped.*RESULT chapter=5 .*world=2 .* amp=f16 skipped_steps=1 final_scale=512 "
                     $<TARGET_FILE:chapter5> --device cpu --amp f16 --init-scale 1024 --model mlp --max-steps=8
                     --inf-at-step 4 --inf-on-rank 1)
# The ResNet's BatchNorm runs on bf16 activations with f32 statistics and parameters.
lockstep_mpirun_test(chapter5_mpirun_resnet_bf16 2 "RESULT chapter=5 model=resnet device=cpu world=2 epochs=2 .* amp=bf16 "
                     $<TARGET_FILE:chapter5> --device cpu --model resnet --dataset cifar10 --data ${VARIED_CIFAR}
                     --batch-size 4 --epochs 2)
lockstep_mpirun_test(chapter5_mpirun_bf16_compressed_gradients 2
                     "gradients: bf16_compress_hook.*RESULT chapter=5 .*world=2 .*comm_hook=bf16_compress_hook "
                     $<TARGET_FILE:chapter5> --device cpu --model mlp --max-steps=8 --comm-hook bf16)
add_test(NAME chapter5_mpirun_amp_off_is_chapter4
         COMMAND ${CMAKE_COMMAND}
                 "-DFIRST=${MPIEXEC_EXECUTABLE};${MPIEXEC_NUMPROC_FLAG};2;$<TARGET_FILE:chapter5>;--device;cpu;--amp;off;--model;mlp;--max-steps=10"
                 "-DSECOND=${MPIEXEC_EXECUTABLE};${MPIEXEC_NUMPROC_FLAG};2;$<TARGET_FILE:chapter4>;--device;cpu;--model;mlp;--max-steps=10"
                 -P ${COMPARE_CHECKSUMS})
set_tests_properties(chapter5_mpirun_amp_off_is_chapter4 PROPERTIES LABELS "chapter;mpi" TIMEOUT 300
                     ENVIRONMENT "${MPI_TEST_ENVIRONMENT}")

# Chapter 6: SyncBatchNorm gives every rank the statistics of all ranks' images (the first
# BatchNorm's running mean is printed by each rank; on the made-up CIFAR-10 whose images
# differ, whose 20 test images keep the evaluation short), a checkpoint written by rank 0 is
# read back bitwise by every rank, accumulation counts the all-reduces it saved, and a job killed
# mid-run resumes to the weights of the uninterrupted one: 8 steps, a checkpoint every 4, rank 1
# killed before step 6, so that the job resumes from a checkpoint in the middle of an epoch,
# with steps of the killed run to repeat and steps the killed run never reached.
foreach(ranks 2 3)
  lockstep_mpirun_test(chapter6_mpirun_${ranks}_ranks ${ranks}
                       "checkpoint of step 4 read back: its [0-9]+ model tensors are bitwise this rank's.*RESULT chapter=6 model=resnet norm=sync device=cpu world=${ranks} "
                       $<TARGET_FILE:chapter6> --device cpu --dataset cifar10 --data ${VARIED_CIFAR} --batch-size 8
                       --max-steps 4 --save-every 4 --checkpoint ${CMAKE_CURRENT_BINARY_DIR}/chapter6-${ranks}.safetensors)
endforeach()
lockstep_mpirun_test(chapter6_accumulation_saves_all_reduces 2
                     "accumulation: 4 backward pass.es. inside no_sync.. saved 4 bucket all-reduce.s..*saved_allreduces=4 "
                     $<TARGET_FILE:chapter6> --device cpu --dataset cifar10 --data ${VARIED_CIFAR} --batch-size 8
                     --max-steps 2 --accumulate 3)
# On the made-up CIFAR-10 (7 steps of 8 images per rank in an epoch): the 8 steps cross an
# epoch's end, after the checkpoint of step 4 that the resumed job starts from.
set(resume_data "--dataset cifar10 --data ${VARIED_CIFAR} --batch-size 8 --epochs 2")
add_test(NAME chapter6_resume_after_kill
         COMMAND ${CMAKE_COMMAND} -DMPIRUN=${MPIEXEC_EXECUTABLE} -DPROGRAM=$<TARGET_FILE:chapter6>
                 -DDIR=${CMAKE_CURRENT_BINARY_DIR} -DSTEPS=8 -DEVERY=4 -DKILL_AT=6
                 "-DEXTRA=${resume_data}" -P ${RESUME_AFTER_KILL})
set_tests_properties(chapter6_resume_after_kill PROPERTIES LABELS "chapter;mpi" TIMEOUT 600
                     ENVIRONMENT "${MPI_TEST_ENVIRONMENT}")
# The same with a warm-up: the checkpoint carries the scheduler, so the resumed run is still
# the uninterrupted one, bit for bit.
add_test(NAME chapter6_resume_after_kill_with_warmup
         COMMAND ${CMAKE_COMMAND} -DMPIRUN=${MPIEXEC_EXECUTABLE} -DPROGRAM=$<TARGET_FILE:chapter6>
                 -DDIR=${CMAKE_CURRENT_BINARY_DIR} -DSTEPS=8 -DEVERY=4 -DKILL_AT=6 -DNAME=warmup-
                 "-DEXTRA=${resume_data} --warmup-epochs 1"
                 -P ${RESUME_AFTER_KILL})
set_tests_properties(chapter6_resume_after_kill_with_warmup PROPERTIES LABELS "chapter;mpi" TIMEOUT 600
                     ENVIRONMENT "${MPI_TEST_ENVIRONMENT}")
# A checkpoint at the end of an epoch resumes (the made-up CIFAR-10 has 7 steps of 8 images per
# rank in an epoch), and the finished job submitted again evaluates and exits 0.
add_test(NAME chapter6_resume_at_epoch_end
         COMMAND ${CMAKE_COMMAND} -DMPIRUN=${MPIEXEC_EXECUTABLE} -DPROGRAM=$<TARGET_FILE:chapter6>
                 -DDIR=${CMAKE_CURRENT_BINARY_DIR} -DEPOCH_STEPS=7
                 "-DEXTRA=--dataset cifar10 --data ${VARIED_CIFAR} --batch-size 8"
                 -P ${CMAKE_CURRENT_LIST_DIR}/resume_at_epoch_end.cmake)
set_tests_properties(chapter6_resume_at_epoch_end PROPERTIES LABELS "chapter;mpi" TIMEOUT 600
                     ENVIRONMENT "${MPI_TEST_ENVIRONMENT}")
# Flags that would do nothing are refused on every rank: more micro-batches per step than an
# epoch has (it trained zero steps and exited 0).
lockstep_mpirun_refusal_test(chapter6_refuses_accumulate_beyond_an_epoch
  "chapter6: error: --accumulate 8: an epoch has only 7 micro-batch.es. of --batch-size 8 per rank, so no optimiser step would ever run"
  ${MPIEXEC_NUMPROC_FLAG} 2 $<TARGET_FILE:chapter6> --device cpu --dataset cifar10 --data ${VARIED_CIFAR} --batch-size 8
  --accumulate 8)
# The fault lab's skip-backward in chapter 6 (it announced the fault and did nothing): the
# other rank's all-reduce waits, and the watchdog ends the job.
add_test(NAME chapter6_fault_skip_backward
         COMMAND ${CMAKE_COMMAND}
                 "-DCOMMAND=${MPIEXEC_EXECUTABLE};${MPIEXEC_NUMPROC_FLAG};2;$<TARGET_FILE:chapter6>;--device;cpu;--dataset;cifar10;--data;${VARIED_CIFAR};--batch-size;8;--max-steps;5;--collective-timeout;5;--fault;skip-backward"
                 "-DMATCH=watchdog: #[0-9]+ [^\n]* has not finished 5(\\.[0-9])? s after this rank started it" -DLIMIT=40
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/mpi/expect_job_fails.cmake)
set_tests_properties(chapter6_fault_skip_backward PROPERTIES LABELS "chapter;mpi" TIMEOUT 120
                     ENVIRONMENT "${MPI_TEST_ENVIRONMENT}")

# Preemption that saves (chapters/common/preemption.h): a signal mid-epoch stops every rank after
# the same step with exit status 75; chapter 6 writes its checkpoint and prints the command that
# resumes, which ends with the uninterrupted run's checksum (8 epochs of the made-up CIFAR-10,
# 7 steps each, so that the signal, sent after step 2, arrives long before the end).
set(PREEMPT ${CMAKE_CURRENT_LIST_DIR}/preempt_and_resume.sh)
set(preempt_cifar --device cpu --threads 1 --dataset cifar10 --data ${VARIED_CIFAR} --batch-size 8 --epochs 8)
set(preempt_mlp --device cpu --threads 1 --model mlp --epochs 1)
foreach(case "chapter6_sigusr1_to_mpirun_saves_and_resumes;chapter6;usr1-mpirun;yes"
             "chapter6_sigterm_to_every_rank_saves_and_resumes;chapter6;term-ranks;yes"
             "chapter4_sigterm_to_every_rank_stops_at_one_step;chapter4;term-ranks;no"
             "chapter5_sigusr1_to_mpirun_stops_at_one_step;chapter5;usr1-mpirun;no")
  list(GET case 0 name)
  list(GET case 1 program)
  list(GET case 2 how)
  list(GET case 3 resume)
  set(flags ${preempt_mlp})
  if(program STREQUAL "chapter6")
    set(flags ${preempt_cifar})
  endif()
  add_test(NAME ${name} COMMAND bash ${PREEMPT} ${MPIEXEC_EXECUTABLE} $<TARGET_FILE:${program}>
                                ${CMAKE_CURRENT_BINARY_DIR} ${how} ${resume} ${flags})
  set_tests_properties(${name} PROPERTIES LABELS "chapter;mpi" TIMEOUT 300 ENVIRONMENT "${MPI_TEST_ENVIRONMENT}")
endforeach()

# Chapter 8: every way of sharding trains the ResNet-8 to the weights of DDP, bit for bit, with 2
# ranks (the average of two shares does not depend on the order of the addition); FSDP with 3
# ranks, without resharding, without prefetch, with clipping and under bf16 autocast; the
# ledgers beside their formulas; the memory timeline; sharded checkpoints resumed at the same and
# at another world size; the flags that need FSDP.
set(chapter8_base $<TARGET_FILE:chapter8> --device cpu --model resnet --dataset cifar10 --data ${VARIED_CIFAR}
                  --batch-size 4 --eval-images 8)
set(chapter8_run ${chapter8_base} --max-steps 3)
foreach(shard zero1 zero2 fsdp)
  add_test(NAME chapter8_${shard}_trains_as_ddp
           COMMAND ${CMAKE_COMMAND}
                   "-DFIRST=${MPIEXEC_EXECUTABLE};${MPIEXEC_NUMPROC_FLAG};2;${chapter8_run};--shard;none"
                   "-DSECOND=${MPIEXEC_EXECUTABLE};${MPIEXEC_NUMPROC_FLAG};2;${chapter8_run};--shard;${shard}"
                   -P ${COMPARE_CHECKSUMS})
  set_tests_properties(chapter8_${shard}_trains_as_ddp PROPERTIES LABELS "chapter;mpi" TIMEOUT 300
                       ENVIRONMENT "${MPI_TEST_ENVIRONMENT}")
endforeach()
lockstep_mpirun_test(chapter8_fsdp_3_ranks_ledgers 3
                     "model state peak [0-9.]+ MiB; formula .4.4.8.Ψ/N = [0-9.]+ MiB, plus the units gathered.*sent in step 3: all_gather 7x [0-9.]+ MiB, reduce_scatter [0-9]+x [0-9.]+ MiB = [0-9.]+ MiB; formula 3Ψ.N-1./N.*RESULT chapter=8 model=resnet device=cpu world=3 .*shard=fsdp optimizer=adam parameters=[0-9]+ peak_bytes=[0-9]+ model_state_bytes=[0-9]+ comm_bytes_per_step=[0-9]+ "
                     ${chapter8_run} --shard fsdp)
lockstep_mpirun_test(chapter8_fsdp_options 2
                     "formula 2Ψ.N-1./N.*RESULT chapter=8 .*shard=fsdp "
                     ${chapter8_run} --shard fsdp --reshard-after-forward false --prefetch false --clip-grad-norm 0.5
                     --amp bf16)
lockstep_mpirun_test(chapter8_zero2_clips_over_shards 2 "RESULT chapter=8 .*shard=zero2 "
                     ${chapter8_run} --shard zero2 --clip-grad-norm 0.5 --optimizer sgd)
lockstep_mpirun_test(chapter8_memory_timeline 2
                     "memory timeline of step 3: [0-9]+ samples written to .*chapter8-timeline.csv"
                     ${chapter8_run} --memory-timeline ${CMAKE_CURRENT_BINARY_DIR}/chapter8-timeline.csv)
add_test(NAME chapter8_sharded_checkpoint_resumes
         COMMAND ${CMAKE_COMMAND} "-DMPIRUN=${MPIEXEC_EXECUTABLE};${MPIEXEC_NUMPROC_FLAG}" "-DRUN=${chapter8_base}"
                 -DDIR=${CMAKE_CURRENT_BINARY_DIR}/chapter8-checkpoint
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/chapters/chapter8_resume.cmake)
set_tests_properties(chapter8_sharded_checkpoint_resumes PROPERTIES LABELS "chapter;mpi" TIMEOUT 300
                     ENVIRONMENT "${MPI_TEST_ENVIRONMENT}")
# A checkpoint every rank finds bad: the job ends with the loader's sentence.
add_test(NAME chapter8_resume_needs_a_checkpoint_folder
         COMMAND ${CMAKE_COMMAND} "-DCOMMAND=${MPIEXEC_EXECUTABLE};${MPIEXEC_NUMPROC_FLAG};2;${chapter8_run};--resume;/nonexistent"
                 "-DMATCH=load_sharded_checkpoint: '/nonexistent': not a folder; a sharded checkpoint is a folder"
                 -DLIMIT=40 -P ${CMAKE_CURRENT_SOURCE_DIR}/mpi/expect_job_fails.cmake)
set_tests_properties(chapter8_resume_needs_a_checkpoint_folder PROPERTIES LABELS "chapter;mpi" TIMEOUT 120
                     ENVIRONMENT "${MPI_TEST_ENVIRONMENT}")
lockstep_mpirun_refusal_test(chapter8_checkpoints_need_fsdp "--save-every and --resume write and read sharded checkpoints"
                             ${MPIEXEC_NUMPROC_FLAG} 2 ${chapter8_run} --shard none --save-every 2)
lockstep_mpirun_refusal_test(chapter8_prefetch_needs_fsdp "--reshard-after-forward and --prefetch are FSDP's"
                             ${MPIEXEC_NUMPROC_FLAG} 2 ${chapter8_run} --shard zero2 --prefetch true)
