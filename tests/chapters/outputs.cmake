# What the chapter programs write: weights that load into the next run, traces, and the
# --metrics CSV with one row per step; and an output that could not be written is refused before
# training, naming the flag. Included by chapter_tests.cmake.

# Weights saved by one run load into the next.
set(CHECKPOINT ${CMAKE_CURRENT_BINARY_DIR}/chapter2-mlp.safetensors)
lockstep_program_test(chapter2_save chapter2 success "saved .*chapter2-mlp.safetensors" --model mlp --max-steps=5 --save ${CHECKPOINT})
lockstep_program_test(chapter2_load chapter2 success "RESULT chapter=2 model=mlp" --model mlp --max-steps=5 --load ${CHECKPOINT})
set_tests_properties(chapter2_save PROPERTIES FIXTURES_SETUP chapter2_checkpoint)
set_tests_properties(chapter2_load PROPERTIES FIXTURES_REQUIRED chapter2_checkpoint)
lockstep_program_test(chapter2_save_folder_missing chapter2 failure "the folder '.*no-such-dir' does not exist"
                      --model mlp --max-steps=1 --save ${CMAKE_CURRENT_BINARY_DIR}/no-such-dir/x.safetensors)
lockstep_program_test(chapter2_trace chapter2 success "trace: [0-9]+ spans written to .*chapter2-trace.json.*RESULT chapter=2 "
                      --model mlp --max-steps=3 --trace ${CMAKE_CURRENT_BINARY_DIR}/chapter2-trace.json)
lockstep_program_test(chapter3_trace chapter3 success "trace: [0-9]+ spans written to .*chapter3-trace.json.*RESULT chapter=3 "
                      --model mlp --max-steps=3 --baseline-steps=1 --trace ${CMAKE_CURRENT_BINARY_DIR}/chapter3-trace.json)
# An output in a folder that does not exist is refused before training.
lockstep_program_test(chapter4_trace_folder_missing chapter4 failure "--trace .*: the folder '.*no-such-dir' does not exist"
                      --max-steps=1 --trace ${CMAKE_CURRENT_BINARY_DIR}/no-such-dir/trace.json)
# An output that exists but cannot be written is refused before training too (the messages are
# the check's own: writing at the end would fail with save_safetensors' or the trace's words).
lockstep_program_test(chapter2_save_to_a_folder chapter2 failure
                      "--save .*: this is a folder; name a file to write, in it or elsewhere"
                      --model mlp --max-steps=1 --save ${CMAKE_CURRENT_BINARY_DIR})
# File permissions mean nothing to root, so the read-only place is /sys, whose file system takes
# no new files from anyone. In a chroot or container without sysfs, /sys is a plain folder that
# root may write in: there the tests skip, saying so.
foreach(case "chapter2_save_where_nothing_can_be_written;chapter2;--save;/sys/lockstep.safetensors;mlp"
             "chapter4_trace_where_nothing_can_be_written;chapter4;--trace;/sys/lockstep-trace.json;cnn")
  list(GET case 0 name)
  list(GET case 1 program)
  list(GET case 2 flag)
  list(GET case 3 path)
  list(GET case 4 model)
  add_test(NAME ${name}
           COMMAND ${CMAKE_COMMAND} "-DPROGRAM=$<TARGET_FILE:${program}>"
                   "-DARGS=--model;${model};--max-steps=1;${flag};${path}" -DEXPECT=failure
                   "-DMATCH=${flag} ${path}: cannot write this file \\(" -DNEEDS=/sys/kernel
                   "-DSKIP=/sys is not sysfs here (a chroot or container), so no place refuses root's files"
                   -P ${RUN_PROGRAM})
  set_tests_properties(${name} PROPERTIES LABELS chapter TIMEOUT 300 SKIP_REGULAR_EXPRESSION "SKIP: ")
endforeach()
lockstep_program_test(chapter3_metrics_to_a_folder chapter3 failure "--metrics .*: this is a folder"
                      --max-steps=1 --metrics ${CMAKE_CURRENT_BINARY_DIR})
lockstep_program_test(chapter6_checkpoint_folder_missing chapter6 failure "--checkpoint .*: the folder '.*no-such-dir' does not exist"
                      --save-every 1 --checkpoint ${CMAKE_CURRENT_BINARY_DIR}/no-such-dir/c.safetensors --max-steps 1)
# --metrics FILE: the header and one row per training step (chapter 4's, under mpirun, in
# mpirun.cmake), and a file in a folder that does not exist is refused before training.
foreach(chapter chapter2 chapter3)
  set(csv ${CMAKE_CURRENT_BINARY_DIR}/${chapter}-metrics.csv)
  add_test(NAME ${chapter}_metrics
           COMMAND ${CMAKE_COMMAND} "-DPROGRAM=$<TARGET_FILE:${chapter}>"
                   "-DARGS=--model;mlp;--max-steps=4;--metrics;${csv}" -DCSV=${csv} -DSTEPS=4 -P ${CHECK_METRICS})
  set_tests_properties(${chapter}_metrics PROPERTIES LABELS chapter TIMEOUT 300)
  lockstep_program_test(${chapter}_metrics_folder_missing ${chapter} failure
                        "--metrics .*no-such-dir/m.csv: the folder '.*no-such-dir' does not exist"
                        --max-steps=1 --metrics ${CMAKE_CURRENT_BINARY_DIR}/no-such-dir/m.csv)
endforeach()
# Chapter 5's rows also hold the loss scale and whether the step was skipped.
set(csv ${CMAKE_CURRENT_BINARY_DIR}/chapter5-metrics.csv)
add_test(NAME chapter5_metrics
         COMMAND ${CMAKE_COMMAND} "-DPROGRAM=$<TARGET_FILE:chapter5>"
                 "-DARGS=--model;mlp;--max-steps=4;--metrics;${csv}" -DCSV=${csv} -DSTEPS=4 -DEXTRA=scale,skipped
                 -P ${CHECK_METRICS})
set_tests_properties(chapter5_metrics PROPERTIES LABELS chapter TIMEOUT 300)

# MFU on every RESULT line: the flops the library counted per sample, and their rate over the
# peak. The MLP's by hand: forward 2 (784 x 256 + 256 x 128 + 128 x 10) = 469,504; backward
# both gradients of the last two layers and the weight gradient of the first (the images need
# none), 537,600. The MFU is a fraction above 0 and below 1.
foreach(chapter chapter2 chapter3 chapter5)
  lockstep_program_test(${chapter}_result_counts_the_mlps_flops ${chapter} success
                        "RESULT chapter=[0-9] .* flops_per_sample=1007104 mfu=0\\.0*[1-9]" --model mlp --max-steps=3)
endforeach()
