# `make results` end to end on tiny settings, so that it cannot rot: tools/results/results.py
# with torchvision's ResNet-50 on the first 64 Fashion-MNIST training and 32 test images, batch
# 8 per device, then checks what it wrote. Run by CTest as
#   cmake -DPYTHON=... -DSCRIPT=tools/results/results.py -DBUILD=<build> -DOUT=<folder> -P tiny_results.cmake
#
# Checks: the CSV has a row for each configuration; one device, DataParallel, DDP and DDP with
# bf16 ran, each with a time per epoch and a test accuracy; a row that did not run says why;
# the markdown table and the SVG chart exist and name the machine and commit.
foreach(var PYTHON SCRIPT BUILD OUT)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "tiny_results.cmake needs -D${var}=...")
  endif()
endforeach()
file(REMOVE_RECURSE "${OUT}")
execute_process(COMMAND "${PYTHON}" "${SCRIPT}" --build "${BUILD}" --out "${OUT}" --model resnet50
                        --train-images 64 --test-images 32 --batch-size 8 --timeout 240
                RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE errors)
message("${output}${errors}")
if(NOT status EQUAL 0)
  message(FATAL_ERROR "results.py exited with status ${status}")
endif()

file(STRINGS "${OUT}/results-cpu.csv" rows)
list(LENGTH rows count)
if(NOT count EQUAL 8)
  message(FATAL_ERROR "results-cpu.csv: expected a header and 7 configurations, got ${count} lines")
endif()
# configuration,devices,per_device_batch,effective_batch,updates_per_epoch,epoch_s,speedup,...
foreach(label "one device" "DataParallel, 2 replicas" "DDP, 2 ranks" "DDP, 2 ranks + mixed precision (bf16)")
  set(found "")
  foreach(row IN LISTS rows)
    string(FIND "${row}" "${label}," at_plain)
    string(FIND "${row}" "\"${label}\"," at_quoted)
    if(at_plain EQUAL 0 OR at_quoted EQUAL 0)
      set(found "${row}")
    endif()
  endforeach()
  if(NOT found MATCHES ",[0-9]+,8,[0-9]+,[0-9]+,[0-9.]+,[0-9.]+,[0-9.]+,[01]\\.[0-9]+,[0-9.]+,$")
    message(FATAL_ERROR "results-cpu.csv: no time and accuracy for '${label}': '${found}'")
  endif()
endforeach()
# The updates per epoch follow from the effective batch: 64 images in batches of 8 and of 16.
foreach(expect "^one device,1,8,8,8," "^\"DDP, 2 ranks\",2,8,16,4,")
  set(matched FALSE)
  foreach(row IN LISTS rows)
    if(row MATCHES "${expect}")
      set(matched TRUE)
    endif()
  endforeach()
  if(NOT matched)
    message(FATAL_ERROR "results-cpu.csv: no row matches ${expect}")
  endif()
endforeach()
# Every row either ran or gives a reason.
foreach(row IN LISTS rows)
  if(NOT row MATCHES "^configuration," AND NOT row MATCHES "[0-9],$" AND NOT row MATCHES ",(needs|skipped|not asked)[^,]*$"
     AND NOT row MATCHES ",\"(needs|skipped)[^\"]*\"$")
    message(FATAL_ERROR "results-cpu.csv: a row neither ran nor says why: '${row}'")
  endif()
endforeach()
file(READ "${OUT}/results-cpu.md" table)
foreach(needle "- machine: " "- commit: " "| configuration | devices | effective batch |" "| one device | 1 | 1 x 8 = 8 | 8 |")
  string(FIND "${table}" "${needle}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "results-cpu.md lacks '${needle}':\n${table}")
  endif()
endforeach()
file(READ "${OUT}/results-cpu.svg" chart)
if(NOT chart MATCHES "^<svg " OR NOT chart MATCHES "DDP, 2 ranks</text>")
  message(FATAL_ERROR "results-cpu.svg is not the bar chart expected")
endif()
