#!/usr/bin/env python3
"""`make results` end to end on tiny settings, so that it cannot rot (CTest: make_results_tiny,
label results): tools/results/results.py with chapter 2's CNN on the first 64 Fashion-MNIST
training and 32 test images, batch 8 per device, then checks what it wrote. (The table's model,
ResNet-50, goes through the same flags and programs; chapter2_resnet50_cifar10 trains it.)

    tiny_results.py BUILD OUT

Checks: the CSV has a row for each configuration; one device, DataParallel, DDP and DDP with
bf16, ZeRO-2 and FSDP ran, each with a time per epoch, a test accuracy and its peak memory per
rank, and as many updates per epoch as 64 images make in its effective batch; a row that did not run says why (its device count, or the
reason its program skipped, any text), and the markdown table shows the same reason; the table
and the SVG chart name the machine, the commit and the workload.
"""
import shutil
import sys
from pathlib import Path

from results_files import check, check_ran, read_rows, row_named, run_results

RAN = ("one device", "DataParallel, 2 replicas", "DDP, 2 ranks", "DDP, 2 ranks + mixed precision (bf16)",
       "ZeRO-2, 2 ranks", "FSDP, 2 ranks")


def main(build, out):
    shutil.rmtree(out, ignore_errors=True)
    run_results(["--build", build, "--out", out, "--model", "cnn", "--train-images", "64", "--test-images", "32",
                 "--batch-size", "8", "--timeout", "240"])
    rows = read_rows(Path(out, "results-cpu.csv"))
    check(len(rows) == 9, f"results-cpu.csv: expected 9 configurations, got {len(rows)}")
    for label in RAN:
        row = row_named(rows, label)
        check_ran(row)
        check(row["per_device_batch"] == "8", f"'{label}' did not run at 8 images per device: {row}")
        check(float(row["peak_mib"]) > 0, f"'{label}' has no peak memory per rank: {row}")
    # The updates per epoch follow from the effective batch: 64 images in batches of 8 and of 16.
    for label, updates in (("one device", "8"), ("DDP, 2 ranks", "4")):
        row = row_named(rows, label)
        check(row["updates_per_epoch"] == updates, f"'{label}': expected {updates} updates per epoch: {row}")
    table = Path(out, "results-cpu.md").read_text()
    for row in rows:
        if not row["epoch_s"]:
            check(row["note"].startswith(("needs ", "skipped: ")), f"a row neither ran nor says why: {row}")
            check(row["note"].replace("|", "\\|") in table, f"results-cpu.md lacks the reason '{row['note']}'")
    for needle in ("- machine: ", "- commit: ", "64 training images per epoch, 32 test images",
                   "| configuration | devices | effective batch |", "| one device | 1 | 1 x 8 = 8 | 8 |"):
        check(needle in table, f"results-cpu.md lacks '{needle}':\n{table}")
    chart = Path(out, "results-cpu.svg").read_text()
    check(chart.startswith("<svg ") and "DDP, 2 ranks</text>" in chart, "results-cpu.svg is not the bar chart expected")
    print("PASS: results-cpu.csv, .md and .svg hold every configuration")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: tiny_results.py BUILD OUT")
    main(*sys.argv[1:])
