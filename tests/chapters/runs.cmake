# The chapter programs run and say what they did: every chapter to its RESULT line, the
# models on each dataset, the device each one chose, chapter 5's mixed precision and chapter 6's
# warm-up. Included by chapter_tests.cmake.

# Every chapter runs to its RESULT line (the script checks the line is there), with small
# settings so the smoke test is quick: five training steps, past the first step's setting up of
# SGD's momentum, where no later step runs other code. Chapter 2 trains 20, the steps of its
# progress window, whose loss is read and checked at the 20th; chapter 3 times one step on one
# device (after its 5 of warm-up) instead of 50 for its comparison, a time no test reads.
set(chapter1_SMOKE_ARGS --size=256)
set(chapter2_SMOKE_ARGS --max-steps=20)
set(chapter3_SMOKE_ARGS --max-steps=5 --baseline-steps=1)
foreach(chapter ${LOCKSTEP_CHAPTERS})
  if(DEFINED ${chapter}_SMOKE_ARGS)
    set(args ${${chapter}_SMOKE_ARGS})
  else()
    set(args --max-steps=5)
  endif()
  lockstep_program_test(${chapter}_smoke ${chapter} success "\nRESULT chapter=[0-9]+ " ${args})
endforeach()

# The ResNets on CIFAR-10's binary format, on the made-up dataset of chapter_tests.cmake.
lockstep_program_test(chapter2_resnet_cifar10 chapter2 success "RESULT chapter=2 model=resnet"
                      --model resnet --dataset cifar10 --data ${FAKE_CIFAR} --batch-size 8 --max-steps=3)
lockstep_program_test(chapter2_resnet50_cifar10 chapter2 success "RESULT chapter=2 model=resnet50"
                      --model resnet50 --dataset cifar10 --data ${FAKE_CIFAR} --batch-size 4 --max-steps=1)
lockstep_program_test(chapter3_resnet_cifar10 chapter3 success "RESULT chapter=3 model=resnet"
                      --model resnet --dataset cifar10 --data ${FAKE_CIFAR} --batch-size 8 --max-steps=3 --baseline-steps=1)
# A short warm-up that runs (its bad values are in refusals.cmake).
lockstep_program_test(chapter6_warms_up chapter6 success
                      "warm-up: lr from 0.025 to 0.05 over 19 optimiser steps \\(an epoch is 1875 steps\\).*RESULT chapter=6 "
                      --model cnn --max-steps 3 --warmup-epochs 0.01 --warmup-start-factor 0.5)

# Chapter 5 (mixed precision). With --amp off it is chapter 4's training, bit for bit; with
# f16 and loss scaling an injected inf gradient is skipped and halves the scale (on every rank
# under mpirun: mpirun.cmake).
add_test(NAME chapter5_amp_off_is_chapter4
         COMMAND ${CMAKE_COMMAND} "-DFIRST=$<TARGET_FILE:chapter5>;--amp;off;--model;mlp;--max-steps=10"
                 "-DSECOND=$<TARGET_FILE:chapter4>;--model;mlp;--max-steps=10" -P ${COMPARE_CHECKSUMS})
set_tests_properties(chapter5_amp_off_is_chapter4 PROPERTIES LABELS chapter TIMEOUT 300)
lockstep_program_test(chapter5_says_which_path_runs chapter5 success
                      "amp: bf16 autocast on cpu, 16-bit GEMMs on the (amx_bf16|avx512_bf16|f32 fallback) path; loss scaling off.*RESULT chapter=5 .* amp=bf16 skipped_steps=0 final_scale=1 "
                      --device cpu --model mlp --max-steps=5)
lockstep_program_test(chapter5_skips_an_inf_step chapter5 success
                      "step 4 skipped: a gradient was inf or NaN; the scale is now 512.*RESULT chapter=5 .* amp=f16 skipped_steps=1 final_scale=512 "
                      --device cpu --amp f16 --init-scale 1024 --model mlp --max-steps=8 --inf-at-step 4)
lockstep_program_test(chapter5_scale_grows_after_clean_steps chapter5 success
                      "RESULT chapter=5 .* skipped_steps=0 final_scale=4096 "
                      --device cpu --amp bf16 --scaler on --init-scale 1024 --growth-interval 3 --model mlp --max-steps=6)

# --device auto, the chapters' default: the resolver's rules are unit tests (test_device_choice);
# here each program's first line names the device it chose and why, and an explicit device is
# named as given.
lockstep_program_test(chapter2_names_its_device chapter2 success "^device: (cpu|cuda:0) \\(auto: [^)]+\\)"
                      --model mlp --max-steps=1)
lockstep_program_test(chapter3_names_its_device chapter3 success "^device: (cpu|cuda:0) \\(auto: [^)]+\\)"
                      --model mlp --max-steps=1 --baseline-steps=1)
lockstep_program_test(chapter4_names_its_device chapter4 success "^\\[rank 0/1\\] device: (cpu|cuda:0) \\(auto: [^)]+\\)"
                      --model mlp --max-steps=1)
lockstep_program_test(chapter2_names_the_device_asked_for chapter2 success "^device: cpu \\(--device cpu\\)"
                      --device cpu --model mlp --max-steps=1)

