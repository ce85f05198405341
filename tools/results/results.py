#!/usr/bin/env python3
"""The results table of chapter 7: one model trained the same way in every configuration this
machine can run (one device, DataParallel, DistributedDataParallel, DDP with mixed precision,
4 ranks, two nodes), written as a CSV, a markdown table and an SVG bar chart.

    tools/results/results.py --build build --out results [--model resnet50] [--devices cpu]
                             [--dataset fashion-mnist] [--data DIR] [--batch-size 256]
                             [--epochs 1] [--train-images N] [--test-images M]

`make results` runs it (Makefile, RESULTS_* variables). Every configuration gets the same model,
seed, learning rate, per-device batch and epochs, over the same images: --train-images and
--test-images make a folder holding the first N training and M test images of the dataset
(0: all of them), so a slow machine can time a shorter epoch; the table says how many images
an epoch had, counted in the data's files (tools/results/dataset_folder.py). A "device" is one
CPU core (--threads 1 per rank or replica) with --devices cpu, one GPU with --devices cuda; rows
needing more devices than the machine has, or a capability it lacks (network namespaces for the
two nodes), are listed with the reason instead of a time. Standard library only: it must run
where matplotlib is missing.

A flag whose value cannot work (a number out of range, a list that names nothing, data that is
missing or unreadable, an --out that cannot be written, a --mpirun that does not exist, an
--only that leaves nothing to run) is refused before any training with one line,
"results.py: error: ...", naming the flag, and exit status 2; the run ends with status 1 when
no configuration ran.
"""
import argparse
import datetime
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import dataset_folder
import tables

REPO = Path(__file__).resolve().parents[2]
PROGRAMS = ("chapter2", "chapter3", "chapter4", "chapter5", "chapter6", "chapter8")
MODELS = ("mlp", "cnn", "resnet", "resnet50")
ROW_KEYS = ("one", "torch", "dp2", "ddp2", "ddp2amp", "ddp4", "ddp4amp", "nodes2")
NOT_ASKED = "not asked for (--only)"


def refuse(message):
    """Stops before any training, on a flag whose value cannot work: one line that names the
    flag, and exit status 2 (argparse's own)."""
    print(f"results.py: error: {message}", file=sys.stderr)
    sys.exit(2)


def fail(message):
    """Stops after the runs began: one line, and exit status 1."""
    print(f"results.py: error: {message}", file=sys.stderr)
    sys.exit(1)


class Parser(argparse.ArgumentParser):
    """argparse, its errors (unknown flags, words for numbers) one line like refuse()'s."""

    def error(self, message):
        refuse(f"{message} (results.py --help lists the flags)")


# ---------------------------------------------------------------------------------------------
# The machine.

def cpu_cores():
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def gpus():
    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


def commit():
    try:
        sha = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=30).stdout.strip()
        return (sha + (" (with uncommitted changes)" if dirty else "")) or "unknown"
    except OSError:
        return "unknown"


# ---------------------------------------------------------------------------------------------
# The configurations.

class Row:
    """One configuration: its label, how many devices it needs, the command that runs it, and
    what else it needs ("fashion-mnist": the only dataset its program reads); after its run, its
    numbers (`result`) or why it has none (`reason`), and the path of its log."""

    def __init__(self, key, label, devices, per_device_batch, command, needs=None):
        self.key, self.label, self.devices = key, label, devices
        self.per_device_batch, self.command, self.needs = per_device_batch, command, needs
        self.result, self.reason, self.log = None, None, None

    @property
    def effective_batch(self):
        return self.devices * self.per_device_batch


# Chapter 8 trains a few steps of Adam by default; the table's rows train as the others do.
SHARDED = ["--optimizer", "sgd", "--max-steps", "0", "--eval-images", "-1"]


def configurations(args, device, available, data):
    """The rows for one device kind, `available` of which the machine has."""
    b = Path(args.build).resolve()
    common = ["--model", args.model, "--dataset", args.dataset, "--data", str(data), "--epochs", str(args.epochs),
              "--lr", str(args.lr), "--seed", str(args.seed)]
    cpu = device == "cpu"
    # A device is a core: one thread per rank or replica. On a GPU the threads do not matter.
    one_thread = ["--threads", "1"] if cpu else []
    batch = ["--batch-size", str(args.batch_size)]
    mpirun = [args.mpirun, "-n"]
    amp = "bf16" if cpu else "f16"
    dev = ["--device", "cpu" if cpu else "cuda"]
    rows = [
        Row("one", "one device", 1, args.batch_size,
            [str(b / "chapter2")] + common + batch + one_thread + ["--device", "cpu" if cpu else "cuda:0"]),
        # DataParallel scatters one batch over its replicas: twice the batch keeps 256 per replica.
        # Its single-device baseline (chapter 3, section 2) is not part of this row: one step.
        Row("dp2", "DataParallel, 2 replicas", 2, args.batch_size,
            [str(b / "chapter3")] + common + ["--batch-size", str(2 * args.batch_size), "--replicas", "2",
                                              "--baseline-steps", "1"] + dev + (["--threads", "2"] if cpu else [])),
        Row("ddp2", "DDP, 2 ranks", 2, args.batch_size,
            mpirun + ["2", str(b / "chapter4")] + common + batch + one_thread + dev),
        Row("ddp2amp", f"DDP, 2 ranks + mixed precision ({amp})", 2, args.batch_size,
            mpirun + ["2", str(b / "chapter5")] + common + batch + one_thread + dev + ["--amp", amp]),
        Row("ddp4", "DDP, 4 ranks", 4, args.batch_size,
            mpirun + ["4", str(b / "chapter4")] + common + batch + one_thread + dev),
        Row("ddp4amp", f"DDP, 4 ranks + mixed precision ({amp})", 4, args.batch_size,
            mpirun + ["4", str(b / "chapter5")] + common + batch + one_thread + dev + ["--amp", amp]),
        # Chapter 8's sharded modes: the same training (SGD with momentum, a whole epoch, the whole
        # test set), each rank keeping a shard of the model state.
        Row("zero2", "ZeRO-2, 2 ranks", 2, args.batch_size,
            mpirun + ["2", str(b / "chapter8")] + common + batch + one_thread + dev + SHARDED + ["--shard", "zero2"]),
        Row("fsdp2", "FSDP, 2 ranks", 2, args.batch_size,
            mpirun + ["2", str(b / "chapter8")] + common + batch + one_thread + dev + SHARDED + ["--shard", "fsdp"]),
    ]
    if args.torch_python:
        # The anchor: PyTorch's one device on the same images (tests/reference/chapter2_torch.py).
        rows.insert(1, Row("torch", "PyTorch, one device", 1, args.batch_size,
                           [args.torch_python, str(REPO / "tests/reference/chapter2_torch.py"), "--model", args.model,
                            "--data", str(data), "--epochs", str(args.epochs), "--lr", str(args.lr), "--seed",
                            str(args.seed)] + batch + (["--threads", "1"] if cpu else ["--device", "cuda"]),
                           needs="fashion-mnist"))
    if cpu:
        # Chapter 6's two nodes: network namespaces on this machine, one rank each, TCP between them;
        # plain BatchNorm, so that the row differs from "DDP, 2 ranks" in the network alone. Where
        # namespaces cannot be made or entered (no root, a container, a chroot), on_two_nodes.sh
        # exits 77 with the reason, which the row then shows.
        rows.append(Row("nodes2", "DDP, 2 nodes x 1 rank (TCP)", 2, args.batch_size,
                        [str(REPO / "tests/multinode/on_two_nodes.sh"), args.mpirun, str(b / "chapter6")] + common
                        + batch + one_thread + dev + ["--norm", "batch"]))
    unit = "cores" if cpu else "GPUs"
    for row in rows:
        if row.devices > available:
            row.reason = f"needs {row.devices} {unit}; this machine has {available}"
        elif row.needs == "fashion-mnist" and args.dataset != "fashion-mnist":
            row.reason = "chapter2_torch.py reads Fashion-MNIST only"
        elif args.only_keys and row.key not in args.only_keys:
            row.reason = NOT_ASKED
    return rows


def parse_result(text):
    """The key=value fields of the last RESULT line of a program's output (None without one)."""
    lines = [line for line in text.splitlines() if line.startswith("RESULT ")]
    if not lines:
        return None
    return dict(field.split("=", 1) for field in lines[-1].split()[1:] if "=" in field)


def run_row(row, out, train_images, timeout):
    """Runs the row's command in `out`, its output logged in out/runs/KEY.log, and sets the row's
    result, or its reason when the run skipped (exit 77), failed, or outlived `timeout` s."""
    row.log = out / "runs" / f"{row.key}.log"
    env = dict(os.environ, LOCKSTEP_MULTINODE_TIMEOUT=str(timeout))
    if os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    print(f"== {row.label}: {' '.join(row.command)}", flush=True)
    start = time.time()
    try:
        proc = subprocess.run(row.command, capture_output=True, text=True, errors="replace", timeout=timeout,
                              env=env, cwd=out)
        output, status = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as e:
        partial = e.stdout or ""
        output, status = partial.decode(errors="replace") if isinstance(partial, bytes) else partial, None
    except OSError as e:  # a program that cannot be started (--torch-python not executable, ...)
        output, status = f"cannot start {e.filename or row.command[0]}: {e.strerror}\n", 126
    row.log.write_text(" ".join(row.command) + "\n" + output)
    result = parse_result(output)
    if status == 77:
        # The skip's reason is the last line the program printed ("SKIP: " dropped), any text.
        last = (output.strip().splitlines() or ["cannot run here"])[-1]
        row.reason = "skipped: " + last.removeprefix("SKIP: ")
    elif status is None:
        row.reason = f"no result within {timeout} s"
    elif status != 0 or result is None:
        row.reason = f"failed (exit status {status}); see runs/{row.key}.log"
    if row.reason:
        print(f"   {row.reason}", flush=True)
        return
    try:
        numbers = {key: float(result[key]) for key in ("samples_per_s", "test_acc", "final_loss")}
        # Time per epoch: the slowest rank's training time (epoch_s) where the chapter reports it,
        # else the epoch's images over the measured throughput.
        epoch_s = float(result["epoch_s"]) if "epoch_s" in result else train_images / numbers["samples_per_s"]
    except (KeyError, ValueError, ZeroDivisionError) as e:
        row.reason = f"its RESULT line has no usable {e}; see runs/{row.key}.log"
        print(f"   {row.reason}", flush=True)
        return
    # Peak bytes of tensor memory on (rank 0's) device, where the chapter reports it.
    peak = float(result["peak_bytes"]) if "peak_bytes" in result else None
    row.result = dict(numbers, epoch_s=epoch_s, wall_s=time.time() - start, peak_bytes=peak)
    print(f"   {epoch_s:.1f} s per epoch, test_acc {row.result['test_acc']:.4f}", flush=True)


# ---------------------------------------------------------------------------------------------

def parse_flags():
    """The flags, each checked; refuses, naming the flag, those whose values cannot work."""
    p = Parser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default="build", help="the build folder holding chapter2 ... chapter6")
    p.add_argument("--out", default="results", help="where the table, the chart, the CSV and the logs go")
    p.add_argument("--model", default="resnet50", choices=MODELS)
    p.add_argument("--dataset", default="fashion-mnist", choices=["fashion-mnist", "cifar10"])
    p.add_argument("--data", default="", help="the dataset's folder (Fashion-MNIST: found as the chapters find it)")
    p.add_argument("--devices", default="cpu", help="comma-separated device kinds: cpu, cuda")
    p.add_argument("--batch-size", type=int, default=256, help="per device")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--train-images", type=int, default=0, help="the first N training images only (0: all)")
    p.add_argument("--test-images", type=int, default=0, help="the first M test images only (0: all; Fashion-MNIST)")
    p.add_argument("--torch-python", default="", help="a Python with PyTorch (and torchvision for resnet50): "
                                                       "adds PyTorch's one device as a row")
    p.add_argument("--mpirun", default="mpirun", help="the MPI launcher (a program on the PATH, or its path)")
    p.add_argument("--timeout", type=int, default=3600, help="seconds one configuration may take")
    p.add_argument("--only", default="", help=f"comma-separated row keys to run ({', '.join(ROW_KEYS)}); the "
                                              "others are listed as not asked for")
    args = p.parse_args()
    for flag, value, lowest in (("--batch-size", args.batch_size, 1), ("--epochs", args.epochs, 1),
                                ("--timeout", args.timeout, 1), ("--seed", args.seed, 0),
                                ("--train-images", args.train_images, 0), ("--test-images", args.test_images, 0)):
        if value < lowest:
            refuse(f"{flag}: expected a number {'above 0' if lowest else 'of 0 or more'}, got '{value}'")
    if not math.isfinite(args.lr) or args.lr <= 0:
        refuse(f"--lr: expected a finite number above 0, got '{args.lr}'")
    if args.dataset == "cifar10" and args.model in ("mlp", "cnn"):
        refuse(f"--model {args.model} reads 1 x 28 x 28 Fashion-MNIST images only: use --model resnet or resnet50 "
               f"with --dataset cifar10")
    # The runs start in --out: a relative path to a program must not depend on where that is.
    args.mpirun, args.torch_python = (os.path.abspath(program) if "/" in program else program
                                      for program in (args.mpirun, args.torch_python))
    args.kinds = listed(args.devices, "--devices", ("cpu", "cuda"), "device kind")
    args.only_keys = listed(args.only, "--only", ROW_KEYS, "configuration") if args.only else []
    return args


def listed(value, flag, known, what):
    """The comma-separated words of a flag's value, each one of `known`, at least one, none twice."""
    words = [word.strip() for word in value.split(",") if word.strip()]
    if not words:
        refuse(f"{flag} '{value}' names no {what}: expected one or more of {', '.join(known)}, comma-separated")
    for word in words:
        if word not in known:
            refuse(f"{flag}: unknown {what} '{word}': expected one or more of {', '.join(known)}")
        if words.count(word) > 1:
            refuse(f"{flag}: '{word}' is named twice")
    return words


def check_programs(args, runnable):
    """The programs the rows that will run need: the chapters, mpirun, PyTorch's Python."""
    for program in PROGRAMS:
        if not os.access(Path(args.build, program), os.X_OK):
            refuse(f"--build {args.build}: {Path(args.build, program)} is missing: build the chapters first "
                   f"(make build)")
    if any(args.mpirun in row.command for row in runnable) and not shutil.which(args.mpirun):
        refuse(f"--mpirun {args.mpirun}: no such program (Debian: apt-get install openmpi-bin)")
    if any(row.key == "torch" for row in runnable):
        if not shutil.which(args.torch_python):
            refuse(f"--torch-python {args.torch_python}: no such program")
        if subprocess.run([args.torch_python, "-c", "import torch"], capture_output=True).returncode != 0:
            refuse(f"--torch-python {args.torch_python} cannot import torch (Debian: apt-get install python3-torch)")


def check_something_runs(args, kind, rows):
    """Refuses an --only whose rows cannot run on this device kind, saying why for each."""
    if not all(row.reason for row in rows):
        return
    keys = [row.key for row in rows]
    reasons = [f"{row.key}: {row.reason}" for row in rows if row.key in args.only_keys]
    reasons += [f"{key}: not a configuration on {kind}" + (" without --torch-python" if key == "torch" else "")
                for key in args.only_keys if key not in keys]
    refuse(f"--only {args.only} leaves nothing that can run on {kind} ({'; '.join(reasons)})")


def make_out_folder(out, flag_value):
    """Creates the output folder and its runs/, and checks that files can be written there."""
    if os.path.exists(out) and not os.path.isdir(out):
        refuse(f"--out {flag_value} is not a folder")
    try:
        (out / "runs").mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as e:
        refuse(f"--out {flag_value}: cannot write there ({e.strerror})")


def main():
    args = parse_flags()
    gpu_names = gpus()
    if "cuda" in args.kinds and not gpu_names:
        refuse("--devices cuda: nvidia-smi lists no GPU on this machine")
    try:
        source = dataset_folder.locate(args.dataset, args.data, REPO)
    except dataset_folder.DatasetError as e:
        refuse(str(e))
    out = Path(args.out).resolve()
    subset = bool(args.train_images or args.test_images)
    data = out / "data" if subset else source
    plans = {}
    for kind in args.kinds:
        available = cpu_cores() if kind == "cpu" else len(gpu_names)
        plans[kind] = (available, configurations(args, kind, available, data))
        check_something_runs(args, kind, plans[kind][1])
    check_programs(args, [row for _, rows in plans.values() for row in rows if not row.reason])

    make_out_folder(out, args.out)
    try:
        if subset:
            data.mkdir(exist_ok=True)
        dataset = dataset_folder.prepare(args.dataset, source, args.train_images, args.test_images, data)
    except dataset_folder.DatasetError as e:
        refuse(str(e))
    except OSError as e:
        refuse(f"--out {args.out}: cannot write the data's copy there ({e.strerror})")
    today = datetime.date.today().isoformat()
    for kind, (available, rows) in plans.items():
        try:
            write_table(args, kind, available, rows, dataset, gpu_names, today, out)
        except OSError as e:
            fail(f"--out {args.out}: cannot write {e.filename} ({e.strerror})")
        if not any(r.result for r in rows):
            fail(f"no configuration ran on {kind}: see {out / 'runs'}")


def write_table(args, kind, available, rows, dataset, gpu_names, today, out):
    """Runs the rows of one device kind and writes their CSV, markdown table and SVG chart."""
    for row in rows:
        if not row.reason:
            run_row(row, out, dataset.train_images, args.timeout)
    base = rows[0].result["epoch_s"] if rows[0].result else None
    device_text = (f"{cpu_model()}, {available} cores; one device = one core (1 thread per rank or replica)"
                   if kind == "cpu" else f"{available} x {gpu_names[0]}; one device = one GPU")
    header = {"title": f"{args.model} on {args.dataset}, {kind.upper()}",
              "facts": [("machine", device_text),
                        ("GPUs", ", ".join(gpu_names) or "none"),
                        ("date", today), ("commit", commit()),
                        ("workload", f"{args.model}, {dataset.train_images:,} training images per epoch, "
                                     f"{dataset.test_images:,} test images, {args.epochs} epoch(s), "
                                     f"{args.batch_size} images per device per step, SGD lr {args.lr} "
                                     f"momentum 0.9, seed {args.seed}"),
                        ("command", " ".join([Path(sys.argv[0]).name] + sys.argv[1:]))]}
    stem = out / f"results-{kind}"
    tables.write_csv(stem.with_suffix(".csv"), rows, dataset.train_images, base)
    tables.write_markdown(stem.with_suffix(".md"), rows, header, dataset.train_images, base)
    tables.write_svg(stem.with_suffix(".svg"), rows, f"{args.model}, {dataset.train_images:,} images per epoch, "
                                                     f"{kind.upper()}: {device_text.split(';')[0]}", base)
    print(f"wrote {stem}.csv, .md and .svg")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:  # Ctrl-C: the running configuration got the signal too and ends
        print("results.py: interrupted", file=sys.stderr)
        sys.exit(130)
