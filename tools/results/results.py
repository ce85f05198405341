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
an epoch had. A "device" is one CPU core (--threads 1 per rank or replica) with --devices cpu,
one GPU with --devices cuda; rows needing more devices than the machine has are listed with the
reason instead of a time. Standard library only: it must run where matplotlib is missing.
"""
import argparse
import csv
import datetime
import gzip
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FASHION_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                 "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
CIFAR_TRAIN = [f"data_batch_{i}.bin" for i in range(1, 6)]
CIFAR_RECORD = 1 + 3 * 32 * 32


def fail(message):
    sys.exit(f"results.py: {message}")


# ---------------------------------------------------------------------------------------------
# The data: the dataset's folder, or a folder with its first N training and M test images.

def find_fashion_mnist(data):
    candidates = [data] if data else [os.environ.get("LOCKSTEP_DATA"), str(REPO / "data"),
                                      "/usr/share/datasets/fashion-mnist"]
    for folder in filter(None, candidates):
        if all(Path(folder, f).exists() or Path(folder, f + ".gz").exists() for f in FASHION_FILES):
            return Path(folder)
    fail(f"no Fashion-MNIST files ({', '.join(FASHION_FILES)}, optionally .gz) in "
         f"{', '.join(filter(None, candidates))}: install Debian's dataset-fashion-mnist or pass --data DIR")


def read_maybe_gz(path):
    plain = Path(path)
    if plain.exists():
        return plain.read_bytes()
    return gzip.open(str(plain) + ".gz", "rb").read()


def idx_prefix(blob, count, name):
    """The IDX file `blob` cut to its first `count` records (count 0: all)."""
    dims = blob[3]
    shape = [int.from_bytes(blob[4 + 4 * d:8 + 4 * d], "big") for d in range(dims)]
    if count > shape[0]:
        fail(f"{name} holds {shape[0]} records, fewer than the {count} asked for")
    count = count or shape[0]
    record = 1
    for size in shape[1:]:
        record *= size
    header = bytearray(blob[:4 + 4 * dims])
    header[4:8] = count.to_bytes(4, "big")
    return bytes(header) + blob[4 + 4 * dims:4 + 4 * dims + count * record]


def prepare_data(args, out):
    """The folder the runs read, and the number of training and test images in it."""
    if args.dataset == "fashion-mnist":
        source = find_fashion_mnist(args.data)
        if not args.train_images and not args.test_images:
            return source, 60000, 10000
        folder = out / "data"
        folder.mkdir(parents=True, exist_ok=True)
        counts = (args.train_images, args.train_images, args.test_images, args.test_images)
        for name, count in zip(FASHION_FILES, counts):
            (folder / name).write_bytes(idx_prefix(read_maybe_gz(source / name), count, name))
        return folder, args.train_images or 60000, args.test_images or 10000
    # CIFAR-10's binary version: five training files and one test file of 10,000 records each.
    # A smaller copy holds the same number of records in every file (what the loader accepts).
    if not args.data:
        fail("--dataset cifar10 needs --data DIR, the folder of CIFAR-10's binary version (data/README.md)")
    source = Path(args.data)
    for name in CIFAR_TRAIN + ["test_batch.bin"]:
        if not (source / name).exists():
            fail(f"{source / name} is missing: --data must hold CIFAR-10's binary version (data/README.md)")
    if not args.train_images:
        return source, 50000, 10000
    if args.train_images % 5:
        fail(f"--train-images {args.train_images}: CIFAR-10 subsets take a multiple of 5 (one share per file)")
    per_file = args.train_images // 5
    folder = out / "data"
    folder.mkdir(parents=True, exist_ok=True)
    for name in CIFAR_TRAIN + ["test_batch.bin"]:
        with open(source / name, "rb") as f:
            (folder / name).write_bytes(f.read(per_file * CIFAR_RECORD))
    return folder, args.train_images, per_file


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
    """One configuration: its label, how many devices it needs, and the command that runs it."""

    def __init__(self, key, label, devices, per_device_batch, command, needs=None):
        self.key, self.label, self.devices = key, label, devices
        self.per_device_batch, self.command, self.needs = per_device_batch, command, needs
        self.result, self.reason, self.log = None, None, None

    @property
    def effective_batch(self):
        return self.devices * self.per_device_batch


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
        # plain BatchNorm, so that the row differs from "DDP, 2 ranks" in the network alone.
        rows.append(Row("nodes2", "DDP, 2 nodes x 1 rank (TCP)", 2, args.batch_size,
                        [str(REPO / "tests/multinode/on_two_nodes.sh"), args.mpirun, str(b / "chapter6")] + common
                        + batch + one_thread + dev + ["--norm", "batch"], needs="root"))
    unit = "cores" if cpu else "GPUs"
    for row in rows:
        if row.devices > available:
            row.reason = f"needs {row.devices} {unit}; this machine has {available}"
        elif row.needs == "fashion-mnist" and args.dataset != "fashion-mnist":
            row.reason = "chapter2_torch.py reads Fashion-MNIST only"
        elif row.needs == "root" and os.geteuid() != 0:
            row.reason = "needs root (network namespaces)"
        elif args.only and row.key not in args.only.split(","):
            row.reason = "not asked for (--only)"
    return rows


def parse_result(text):
    lines = [line for line in text.splitlines() if line.startswith("RESULT ")]
    if not lines:
        return None
    return dict(field.split("=", 1) for field in lines[-1].split()[1:] if "=" in field)


def run_row(row, out, train_images, timeout):
    row.log = out / "runs" / f"{row.key}.log"
    env = dict(os.environ, LOCKSTEP_MULTINODE_TIMEOUT=str(timeout))
    if os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    print(f"== {row.label}: {' '.join(row.command)}", flush=True)
    start = time.time()
    try:
        proc = subprocess.run(row.command, capture_output=True, text=True, timeout=timeout, env=env, cwd=out)
        output, status = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as e:
        partial = e.stdout or ""
        output, status = partial.decode(errors="replace") if isinstance(partial, bytes) else partial, None
    row.log.write_text(" ".join(row.command) + "\n" + output)
    result = parse_result(output)
    if status == 77:
        row.reason = "skipped: " + (output.strip().splitlines() or ["cannot run here"])[-1]
    elif status is None:
        row.reason = f"no result within {timeout} s"
    elif status != 0 or result is None:
        row.reason = f"failed (exit status {status}); see runs/{row.key}.log"
    if row.reason:
        print(f"   {row.reason}", flush=True)
        return
    # Time per epoch: the slowest rank's training time (epoch_s) where the chapter reports it,
    # else the epoch's images over the measured throughput.
    epoch_s = float(result["epoch_s"]) if "epoch_s" in result else train_images / float(result["samples_per_s"])
    row.result = {"epoch_s": epoch_s, "samples_per_s": float(result["samples_per_s"]),
                  "test_acc": float(result["test_acc"]), "final_loss": float(result["final_loss"]),
                  "wall_s": time.time() - start}
    print(f"   {epoch_s:.1f} s per epoch, test_acc {row.result['test_acc']:.4f}", flush=True)


# ---------------------------------------------------------------------------------------------
# The outputs.

def updates(row, train_images):
    return -(-train_images // row.effective_batch)  # batches per epoch: the last one may be short


def write_csv(path, rows, train_images, base):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["configuration", "devices", "per_device_batch", "effective_batch", "updates_per_epoch",
                    "epoch_s", "speedup", "samples_per_s", "test_acc", "final_loss", "note"])
        for r in rows:
            if r.result:
                w.writerow([r.label, r.devices, r.per_device_batch, r.effective_batch, updates(r, train_images),
                            f"{r.result['epoch_s']:.2f}", f"{base / r.result['epoch_s']:.2f}" if base else "",
                            f"{r.result['samples_per_s']:.1f}", f"{r.result['test_acc']:.4f}",
                            f"{r.result['final_loss']:.4f}", ""])
            else:
                w.writerow([r.label, r.devices, r.per_device_batch, r.effective_batch, "", "", "", "", "", "", r.reason])


def write_markdown(path, rows, header, train_images, base):
    lines = [f"# {header['title']}", ""]
    lines += [f"- {k}: {v}" for k, v in header["facts"]]
    lines += ["", "| configuration | devices | effective batch | updates per epoch | s per epoch | speed-up | "
              "samples/s | test accuracy |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r.result:
            speedup = f"{base / r.result['epoch_s']:.2f}x" if base else "-"
            lines.append(f"| {r.label} | {r.devices} | {r.devices} x {r.per_device_batch} = {r.effective_batch:,} | "
                         f"{updates(r, train_images)} | {r.result['epoch_s']:.1f} | {speedup} | "
                         f"{r.result['samples_per_s']:.1f} | {100 * r.result['test_acc']:.1f}% |")
        else:
            lines.append(f"| {r.label} | {r.devices} | {r.devices} x {r.per_device_batch} = {r.effective_batch:,} | "
                         f"- | - | - | - | {r.reason} |")
    Path(path).write_text("\n".join(lines) + "\n")


def esc(text):
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def write_svg(path, rows, title, base):
    """Horizontal bars: seconds per epoch for each configuration that ran, speed-up and accuracy
    written beside each bar."""
    ran = [r for r in rows if r.result]
    missing = [r for r in rows if not r.result]
    left, bar_h, gap, width, top, note_h = 300, 26, 12, 900, 70, 16
    # One line of small print under the bars for each configuration that did not run.
    height = top + len(ran) * (bar_h + gap) + 30 + (note_h * (len(missing) + 1) if missing else 20)
    longest = max((r.result["epoch_s"] for r in ran), default=1.0)
    scale = (width - left - 230) / longest
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="14">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="28" text-anchor="middle" font-size="17">{esc(title)}</text>',
           f'<text x="{left}" y="54" fill="#555">seconds per epoch (shorter is faster) · speed-up over one device · '
           f'test accuracy</text>']
    for i, r in enumerate(ran):
        y = top + i * (bar_h + gap)
        w = max(1.0, r.result["epoch_s"] * scale)
        color = "#8c8c8c" if r.key == "torch" else "#dd8452" if "mixed" in r.label else "#4c72b0"
        speedup = f" · {base / r.result['epoch_s']:.2f}x" if base else ""
        svg += [f'<text x="{left - 10}" y="{y + bar_h * 0.7}" text-anchor="end">{esc(r.label)}</text>',
                f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{color}"/>',
                f'<text x="{left + w + 8:.1f}" y="{y + bar_h * 0.7}">{r.result["epoch_s"]:.1f} s{speedup} · '
                f'{100 * r.result["test_acc"]:.1f}%</text>']
    if missing:
        y = top + len(ran) * (bar_h + gap) + 30
        svg.append(f'<text x="20" y="{y}" font-size="12" fill="#555">not run:</text>')
        for i, r in enumerate(missing):
            svg.append(f'<text x="30" y="{y + note_h * (i + 1)}" font-size="12" fill="#555">'
                       f'{esc(r.label)}: {esc(r.reason)}</text>')
    svg.append("</svg>")
    Path(path).write_text("\n".join(svg) + "\n")


# ---------------------------------------------------------------------------------------------

def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default="build", help="the build folder holding chapter2 ... chapter6")
    p.add_argument("--out", default="results", help="where the table, the chart, the CSV and the logs go")
    p.add_argument("--model", default="resnet50", help="mlp, cnn, resnet or resnet50")
    p.add_argument("--dataset", default="fashion-mnist", choices=["fashion-mnist", "cifar10"])
    p.add_argument("--data", default="", help="the dataset's folder (Fashion-MNIST: found as the chapters find it)")
    p.add_argument("--devices", default="cpu", help="comma-separated device kinds: cpu, cuda")
    p.add_argument("--batch-size", type=int, default=256, help="per device")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--train-images", type=int, default=0, help="the first N training images only (0: all)")
    p.add_argument("--test-images", type=int, default=0, help="the first M test images only (0: all)")
    p.add_argument("--torch-python", default="", help="a Python with PyTorch (and torchvision for resnet50): "
                                                       "adds PyTorch's one device as a row")
    p.add_argument("--mpirun", default="mpirun")
    p.add_argument("--timeout", type=int, default=3600, help="seconds one configuration may take")
    p.add_argument("--only", default="", help="comma-separated row keys to run (one, torch, dp2, ddp2, "
                                              "ddp2amp, ddp4, ddp4amp, nodes2); the others are listed as not asked for")
    args = p.parse_args()
    if args.batch_size <= 0 or args.epochs <= 0 or args.train_images < 0 or args.test_images < 0:
        fail("--batch-size and --epochs must be above 0, --train-images and --test-images 0 or more")
    kinds = [k.strip() for k in args.devices.split(",") if k.strip()]
    for kind in kinds:
        if kind not in ("cpu", "cuda"):
            fail(f"--devices: unknown device kind '{kind}': expected cpu or cuda")
    for program in ("chapter2", "chapter3", "chapter4", "chapter5", "chapter6"):
        if not os.access(Path(args.build, program), os.X_OK):
            fail(f"{Path(args.build, program)} is missing: build the chapters first (make build)")

    out = Path(args.out).resolve()
    (out / "runs").mkdir(parents=True, exist_ok=True)
    data, train_images, test_images = prepare_data(args, out)
    gpu_names = gpus()
    today = datetime.date.today().isoformat()
    for kind in kinds:
        available = cpu_cores() if kind == "cpu" else len(gpu_names)
        if kind == "cuda" and not available:
            fail("--devices cuda: nvidia-smi lists no GPU on this machine")
        rows = configurations(args, kind, available, data)
        for row in rows:
            if not row.reason:
                run_row(row, out, train_images, args.timeout)
        base = rows[0].result["epoch_s"] if rows[0].result else None
        device_text = (f"{cpu_model()}, {available} cores; one device = one core (1 thread per rank or replica)"
                       if kind == "cpu" else f"{available} x {gpu_names[0]}; one device = one GPU")
        header = {"title": f"{args.model} on {args.dataset}, {kind.upper()}",
                  "facts": [("machine", device_text),
                            ("GPUs", ", ".join(gpu_names) or "none"),
                            ("date", today), ("commit", commit()),
                            ("workload", f"{args.model}, {train_images:,} training images per epoch, "
                                         f"{test_images:,} test images, {args.epochs} epoch(s), "
                                         f"{args.batch_size} images per device per step, SGD lr {args.lr} "
                                         f"momentum 0.9, seed {args.seed}"),
                            ("command", " ".join([Path(sys.argv[0]).name] + sys.argv[1:]))]}
        stem = out / f"results-{kind}"
        write_csv(stem.with_suffix(".csv"), rows, train_images, base)
        write_markdown(stem.with_suffix(".md"), rows, header, train_images, base)
        write_svg(stem.with_suffix(".svg"), rows, f"{args.model}, {train_images:,} images per epoch, {kind.upper()}: "
                                                  f"{device_text.split(';')[0]}", base)
        print(f"wrote {stem}.csv, .md and .svg")
        if not any(r.result for r in rows):
            fail(f"no configuration ran on {kind}: see {out / 'runs'}")


if __name__ == "__main__":
    main()
