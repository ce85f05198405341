# The chapter programs refuse bad input with a sentence a student can act on and a normal
# non-zero exit, never a crash or a hang: unknown flags, numbers out of range, data that is
# missing or corrupt, a device or launcher the machine does not have, a checkpoint that is not
# one, and training that diverges. Included by chapter_tests.cmake.
foreach(chapter ${LOCKSTEP_CHAPTERS})
  lockstep_program_test(${chapter}_rejects_unknown_flag ${chapter} failure "--no-such-flag" --no-such-flag)
endforeach()
# Numbers out of range are refused with a sentence naming the flag and what it takes.
lockstep_program_test(chapter2_rejects_zero_batch chapter2 failure "--batch-size: expected a number above 0, got '0'"
                      --batch-size 0)
lockstep_program_test(chapter4_rejects_negative_steps chapter4 failure
                      "--max-steps: expected a number of 0 or more, got '-1'" --max-steps -1)
lockstep_program_test(chapter4_rejects_a_negative_collective_timeout chapter4 failure
                      "--collective-timeout: expected a number of 0 or more, got '-5'" --collective-timeout -5)
lockstep_program_test(chapter5_rejects_an_unknown_debug_level chapter5 failure "--distributed-debug: loud not in .off,detail."
                      --distributed-debug loud)
lockstep_program_test(chapter4_rejects_a_malformed_timeout_variable chapter4 failure
                      "LOCKSTEP_COLLECTIVE_TIMEOUT: expected a number of seconds, got \"soon\""
                      --max-steps 1)
set_tests_properties(chapter4_rejects_a_malformed_timeout_variable PROPERTIES ENVIRONMENT LOCKSTEP_COLLECTIVE_TIMEOUT=soon)
# Only numbers that make sense: finite ones (an infinite --lr once trained on to final_loss=nan
# and exit 0; CLI::Range let a NaN --momentum through), whole numbers that fit in 64 bits (CLI11
# alone clamps them to 2^63 - 1), and at most 1024 threads (100000 crashed in the OpenMP runtime).
lockstep_program_test(chapter2_rejects_an_infinite_lr chapter2 failure
                      "--lr: expected a number above 0, got 'inf': a flag takes finite numbers only" --lr inf)
lockstep_program_test(chapter3_rejects_a_nan_lr chapter3 failure
                      "--lr: expected a number above 0, got 'nan': a flag takes finite numbers only" --lr nan)
lockstep_program_test(chapter4_rejects_a_nan_momentum chapter4 failure
                      "--momentum: expected a number from 0 to 1, got 'nan'" --momentum nan)
lockstep_program_test(chapter2_rejects_an_infinite_weight_decay chapter2 failure
                      "--weight-decay: expected a number of 0 or more, got 'inf'" --weight-decay inf)
lockstep_program_test(chapter5_rejects_an_infinite_init_scale chapter5 failure
                      "--init-scale: expected a number above 0, got 'inf'" --init-scale inf)
lockstep_program_test(chapter2_rejects_max_steps_beyond_64_bits chapter2 failure
                      "--max-steps: expected a number of 0 or more, got '99999999999999999999': the largest whole number a flag takes is 9223372036854775807"
                      --max-steps 99999999999999999999)
lockstep_program_test(chapter2_rejects_too_many_threads chapter2 failure
                      "--threads: expected a number from 0 to 1024, got '100000'" --threads 100000)
lockstep_program_test(chapter3_rejects_a_word_for_a_number chapter3 failure "--lr: expected a number above 0, got 'fast'"
                      --lr fast)
# A matmul larger than the machine's memory: refused before any work (it said std::bad_alloc).
# Flags that would do nothing: an overflow planted after the last step, a rank for an overflow
# that is never planted, and chapter 6's checkpoint with no file name.
lockstep_program_test(chapter5_rejects_inf_at_step_past_the_end chapter5 failure
                      "--inf-at-step 6: the run has only 5 step.s. .2 epoch.s. of [0-9]+ steps, --max-steps 5., so no gradient would overflow"
                      --model mlp --max-steps 5 --inf-at-step 6)
lockstep_program_test(chapter5_inf_on_rank_needs_inf_at_step chapter5 failure "--inf-on-rank requires --inf-at-step"
                      --model mlp --max-steps 5 --inf-on-rank 0)
# (add_test keeps the empty argument, which a list passed on to run_program.cmake would drop;
# the message is printed only on the error path.)
add_test(NAME chapter6_rejects_an_empty_checkpoint COMMAND chapter6 --max-steps 1 --checkpoint "")
set_tests_properties(chapter6_rejects_an_empty_checkpoint PROPERTIES LABELS chapter PASS_REGULAR_EXPRESSION
                     "chapter6: error: --checkpoint is empty: name the file checkpoints are written to")
lockstep_program_test(chapter1_rejects_a_size_beyond_memory chapter1 failure
                      "--size 10000000: the timing needs three 10000000x10000000 f32 matrices, about [0-9]+ GiB, and this machine has about [0-9]+ GiB of memory; use a smaller --size"
                      --size 10000000)
lockstep_program_test(chapter1_rejects_bad_device chapter1 failure "unknown device 'tpu': expected cpu, cuda or cuda:N"
                      --device tpu)
# Chapter 6's warm-up flags: the bad values refused with a sentence (a short warm-up that runs
# is in runs.cmake).
lockstep_program_test(chapter6_rejects_negative_warmup_epochs chapter6 failure
                      "--warmup-epochs: expected a number of 0 or more, got '-1'" --warmup-epochs -1)
lockstep_program_test(chapter6_rejects_a_zero_warmup_start_factor chapter6 failure
                      "--warmup-start-factor: expected a number above 0, got '0'" --warmup-epochs 1 --warmup-start-factor 0)
lockstep_program_test(chapter6_rejects_a_warmup_start_factor_above_one chapter6 failure
                      "--warmup-start-factor: expected a number from 0 to 1, got '1.5'" --warmup-epochs 1 --warmup-start-factor 1.5)
lockstep_program_test(chapter6_warmup_start_factor_needs_warmup_epochs chapter6 failure
                      "--warmup-start-factor requires --warmup-epochs" --warmup-start-factor 0.5)
lockstep_program_test(chapter6_rejects_a_warmup_longer_than_the_run chapter6 failure
                      "--warmup-epochs 2 is longer than the run \\(--epochs 1\\)" --warmup-epochs 2 --max-steps 1)
# A flag the chosen optimiser has no use for is refused, not ignored.
lockstep_program_test(chapter6_refuses_momentum_with_adam chapter6 failure
                      "--momentum 0.5 is SGD's, and --optimizer adam has none" --optimizer adam --momentum 0.5)
# A checkpoint that is missing or is not one: a sentence naming the file, before any training.
lockstep_program_test(chapter6_resume_needs_the_file chapter6 failure "no-such.safetensors"
                      --resume ${CMAKE_CURRENT_BINARY_DIR}/no-such.safetensors --max-steps 1)
lockstep_program_test(chapter6_resume_refuses_a_file_that_is_not_a_checkpoint chapter6 failure
                      "CMakeLists.txt" --resume ${CMAKE_CURRENT_SOURCE_DIR}/CMakeLists.txt --max-steps 1)
# Training that diverges stops at the first report that reads a loss of inf or NaN, naming its
# steps: with an lr of 1e30 the loss is nan from the second step on.
lockstep_program_test(chapter2_stops_when_the_loss_diverges chapter2 failure
                      "the training loss became nan in steps 1-20 \\(epoch 1\\): the training diverged; try a lower --lr"
                      --model mlp --lr 1e30 --max-steps=30)
lockstep_program_test(chapter3_stops_at_the_step_the_loss_diverges chapter3 failure
                      "the training loss became nan at step 2 \\(epoch 1\\).*try a lower --lr"
                      --model mlp --lr 1e30 --max-steps=30 --baseline-steps=1)
lockstep_program_test(chapter4_stops_when_the_loss_diverges chapter4 failure
                      "the training loss became nan in steps 1-5 \\(epoch 1\\).*try a lower --lr"
                      --model mlp --lr 1e30 --max-steps=5)
lockstep_program_test(chapter5_stops_when_the_loss_diverges chapter5 failure
                      "the training loss became nan in steps 1-5 \\(epoch 1\\).*try a lower --lr"
                      --model mlp --lr 1e30 --max-steps=5)
lockstep_program_test(chapter2_metrics_name_the_step_the_loss_diverges chapter2 failure
                      "the training loss became nan at step 2 \\(epoch 1\\)"
                      --model mlp --lr 1e30 --max-steps=30 --metrics ${CMAKE_CURRENT_BINARY_DIR}/chapter2-diverged.csv)

# Chapter 2 with bad data: a directory without the files, and files that are not IDX at all.
set(CORRUPT_DATA ${CMAKE_CURRENT_BINARY_DIR}/corrupt-fashion-mnist)
foreach(name train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte)
  file(WRITE ${CORRUPT_DATA}/${name} "this is not an IDX file")
endforeach()
lockstep_program_test(chapter2_missing_data chapter2 failure "does not hold the Fashion-MNIST files.*\\(use --data DIR"
                      --data ${CMAKE_CURRENT_BINARY_DIR}/no-such-dir --max-steps=1)
lockstep_program_test(chapter2_corrupt_data chapter2 failure "train-images-idx3-ubyte: bad magic number"
                      --data ${CORRUPT_DATA} --max-steps=1)
lockstep_program_test(chapter2_cuda_without_gpu chapter2 failure "cannot use cuda:0: .*Device::cpu.*\\(use --device cpu\\)"
                      --device cuda --max-steps=1)
# --cuda-graph: a GPU's feature; refused on the CPU, with Adam (its step count lives on the host)
# and with --trace (a replay records no spans), before any data is read.
lockstep_program_test(chapter2_cuda_graph_needs_a_gpu chapter2 failure
                      "--cuda-graph records the training step as a CUDA graph, which needs a GPU; this run is on cpu"
                      --device cpu --cuda-graph --max-steps=1)
lockstep_program_test(chapter2_cuda_graph_needs_sgd chapter2 failure "--cuda-graph works with --optimizer sgd only: adam's"
                      --cuda-graph --optimizer adam --max-steps=1)
lockstep_program_test(chapter2_cuda_graph_refuses_trace chapter2 failure "--cuda-graph and --trace cannot go together"
                      --cuda-graph --trace ${CMAKE_CURRENT_BINARY_DIR}/graph-trace.json --max-steps=1)
lockstep_program_test(chapter4_nccl_needs_cuda chapter4 failure "NCCL backend moves CUDA tensors only.*use --device cuda, or --backend mpi"
                      --backend nccl --max-steps=1)
# Started as if by torchrun, which starts no MPI job: a clear error, not two one-rank jobs.
lockstep_program_test(chapter4_torchrun_needs_mpirun chapter4 failure
                      "torchrun says this process is rank 0 of 2, but MPI sees a job of 1 process.es.; .*mpirun -n 2"
                      --max-steps=1)
set_tests_properties(chapter4_torchrun_needs_mpirun PROPERTIES ENVIRONMENT "RANK=0;WORLD_SIZE=2")
# Slurm's task 1 of 2 alone (srun without MPI support): refused like torchrun's. Task 0 of a
# batch script that runs one process is a world of one (chapter4_slurm_batch_script_runs_alone).
lockstep_program_test(chapter4_srun_without_mpi_is_refused chapter4 failure
                      "slurm says this process is rank 1 of 2, but MPI sees a job of 1 process.es.; .*srun --mpi=pmix"
                      --max-steps=1)
set_tests_properties(chapter4_srun_without_mpi_is_refused PROPERTIES ENVIRONMENT "SLURM_PROCID=1;SLURM_NTASKS=2")
# Another MPI's launcher (MPICH's mpiexec sets PMI_*) around a program built with Open MPI: each
# process would be a world of one; refused like torchrun's.
lockstep_program_test(chapter4_another_mpis_launcher_is_refused chapter4 failure
                      "mpich says this process is rank 1 of 2, but MPI sees a job of 1 process.es.; .*another MPI's.*mpirun -n 2"
                      --max-steps=1)
set_tests_properties(chapter4_another_mpis_launcher_is_refused PROPERTIES ENVIRONMENT "PMI_RANK=1;PMI_SIZE=2")
lockstep_program_test(chapter4_slurm_batch_script_runs_alone chapter4 success "world: 1 rank.s. started by slurm"
                      --model mlp --max-steps=1)
set_tests_properties(chapter4_slurm_batch_script_runs_alone PROPERTIES ENVIRONMENT
                     "SLURM_PROCID=0;SLURM_NTASKS=2;SLURM_TASKS_PER_NODE=2")
# A model that cannot take the dataset's images (the made-up CIFAR-10 of chapter_tests.cmake).
lockstep_program_test(chapter3_cnn_needs_fashion_mnist chapter3 failure "use --model resnet or resnet50 with --dataset cifar10"
                      --dataset cifar10 --data ${FAKE_CIFAR} --max-steps=1)
lockstep_program_test(chapter2_cnn_needs_fashion_mnist chapter2 failure "use --model resnet or resnet50 with --dataset cifar10"
                      --model cnn --dataset cifar10 --data ${FAKE_CIFAR} --max-steps=1)
# Chapter 5's own flags: a rank the job does not have, a dtype autocast does not know.
lockstep_program_test(chapter5_rejects_a_rank_that_does_not_exist chapter5 failure
                      "--inf-on-rank 1: the job has only 1 rank.s., numbered from 0"
                      --model mlp --max-steps=1 --inf-at-step 1 --inf-on-rank 1)
lockstep_program_test(chapter5_rejects_an_unknown_amp_dtype chapter5 failure "--amp: f8 not in" --amp f8)
# --amp f16 on a GPU this machine does not have (as chapter2_cuda_without_gpu): the device's own
# sentence and the flag to use. (A GPU without bf16, before Ampere, is refused by AutocastGuard.)
lockstep_program_test(chapter5_f16_without_a_gpu_says_why chapter5 failure
                      "(cannot use cuda:0: |built without CUDA).*\\(use --device cpu\\)"
                      --device cuda --amp f16 --max-steps=1)
