#!/usr/bin/env python3
"""tools/results/results.py states what the runs used and why a row did not run, whatever the
text (CTest: results_counts_and_reasons, label results).

    counts_and_reasons.py BUILD OUT

Makes a Fashion-MNIST folder of 200 training and 100 test images and passes it as --data
(no --train-images): the table must say 200 training images, and 25 updates per epoch at 8
images per step (13 for DDP's 2 x 8). The two-node row runs with an `ip` command on the PATH
that fails to enter a namespace the way `ip netns exec` fails in a chroot, its message holding
quotes and commas: the row must be skipped with that message as its reason, one field of the
CSV and one cell of the markdown table, and the run must still succeed.
"""
import gzip
import os
import shutil
import sys
from pathlib import Path

from results_files import check, check_ran, read_rows, row_named, run_results

TRAIN, TEST = 200, 100
FILES = {"train-images-idx3-ubyte": TRAIN, "train-labels-idx1-ubyte": TRAIN,
         "t10k-images-idx3-ubyte": TEST, "t10k-labels-idx1-ubyte": TEST}
# What `ip netns exec` prints in a chroot, and commas besides.
NETNS_ERROR = '"mount --make-rslave /" failed: Invalid argument (a chroot, "no namespaces", no mounts)'
FAKE_IP = f"""#!/bin/sh
# `ip` that makes namespaces but cannot enter them, as in a chroot.
if [ "$1 $2" = "netns exec" ]; then echo '{NETNS_ERROR}' >&2; exit 1; fi
exit 0
"""


def fashion_mnist_folder():
    for folder in (os.environ.get("LOCKSTEP_DATA"), "/usr/share/datasets/fashion-mnist"):
        if folder and Path(folder, "train-images-idx3-ubyte.gz").exists():
            return Path(folder)
    check(False, "no Fashion-MNIST (.gz files) in $LOCKSTEP_DATA or /usr/share/datasets/fashion-mnist")


def write_small_dataset(folder):
    """The first records of each Fashion-MNIST file, its header's count changed to match."""
    source = fashion_mnist_folder()
    folder.mkdir(parents=True)
    for name, count in FILES.items():
        blob = bytearray(gzip.open(source / (name + ".gz")).read())
        dims = blob[3]
        record = 1
        for d in range(1, dims):
            record *= int.from_bytes(blob[4 + 4 * d:8 + 4 * d], "big")
        blob[4:8] = count.to_bytes(4, "big")
        (folder / name).write_bytes(bytes(blob[:4 + 4 * dims + count * record]))


def main(build, out):
    out = Path(out)
    shutil.rmtree(out, ignore_errors=True)
    write_small_dataset(out / "data")
    fake = out / "fake-ip"
    fake.mkdir()
    (fake / "ip").write_text(FAKE_IP)
    (fake / "ip").chmod(0o755)
    env = dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}")
    run_results(["--build", build, "--out", str(out / "table"), "--data", str(out / "data"), "--model", "mlp",
                 "--batch-size", "8", "--only", "one,ddp2,nodes2", "--timeout", "120"], env)

    rows = read_rows(out / "table" / "results-cpu.csv")
    table = (out / "table" / "results-cpu.md").read_text()
    check(f"{TRAIN} training images per epoch, {TEST} test images" in table,
          f"results-cpu.md does not state the {TRAIN} training and {TEST} test images of --data:\n{table}")
    for label, updates in (("one device", "25"), ("DDP, 2 ranks", "13")):
        row = row_named(rows, label)
        check_ran(row)
        check(row["updates_per_epoch"] == updates, f"'{label}': expected {updates} updates per epoch: {row}")
    reason = f"skipped: cannot enter a network namespace with 'ip netns exec': {NETNS_ERROR}"
    nodes = row_named(rows, "DDP, 2 nodes x 1 rank (TCP)")
    check(nodes["note"] == reason and not nodes["epoch_s"], f"the two-node row should say '{reason}': {nodes}")
    check(f"| {reason} |" in table, f"results-cpu.md does not show '{reason}':\n{table}")
    print("PASS: the images counted in --data, and the skip's reason whole in the CSV and the table")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: counts_and_reasons.py BUILD OUT")
    main(*sys.argv[1:])
