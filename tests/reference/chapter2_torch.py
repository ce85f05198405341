#!/usr/bin/env python3
"""The same workload as chapter2, in PyTorch: the reference for accuracy and speed.

Same data (Fashion-MNIST from IDX files, normalised with mean 0.2860 and std 0.3530), same
models (the nn.Sequential definitions below give the same state_dict keys as Lockstep's), same
default initialisation, optimiser, batch size, thread count and per-epoch reshuffling. Prints
one line per epoch and a final `RESULT chapter=2 ...` line in the same format as ./chapter2.

Run with Debian's PyTorch (python3-torch): /usr/bin/python3 tests/reference/chapter2_torch.py

With --device cuda (a PyTorch built with CUDA, on the GPU machine that ran ./chapter2 --device
cuda) the model and batches live on the GPU, as in chapter2: each batch is gathered on the CPU,
copied into pinned memory and sent with non_blocking=True (here on the main thread; chapter2's
DataLoader pins on its worker thread), and the timers are read only after
torch.cuda.synchronize(). The math is plain f32 as in Lockstep, whose cuBLAS GEMMs use no TF32:
PyTorch's default of TF32 convolutions on Ampere and newer GPUs (torch.backends.cudnn.allow_tf32)
is turned off unless --tf32 is given.

With --amp bf16 (or f16) the forward pass runs under torch.autocast(device, dtype), as chapter5
--amp does: convolutions and linear layers in 16 bits, the loss in f32, f32 master weights; f16
adds a torch.cuda.amp.GradScaler (on the CPU f16 autocast is refused by PyTorch 1.13). The
RESULT line then carries amp=bf16 or amp=f16, and the benchmark of chapter 5
(tests/bench/amp_benchmarks.sh) reads it beside chapter5's.
"""
import contextlib
import argparse
import gzip
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

MEAN, STD = 0.2860, 0.3530
SEARCH = ["data", "/usr/share/datasets/fashion-mnist"]


def read_idx(path):
    """Reads an IDX file (optionally gzip-compressed) into a uint8 numpy array."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    rank = magic & 0xFF
    dims = struct.unpack(">" + "I" * rank, data[4:4 + 4 * rank])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * rank).reshape(dims)


def find_file(root, stem):
    for name in (stem, stem + ".gz"):
        if os.path.exists(os.path.join(root, name)):
            return os.path.join(root, name)
    return None


def load(data_dir, train):
    # Like Lockstep: a directory the user named must hold the files; otherwise the defaults.
    named = data_dir or os.environ.get("LOCKSTEP_DATA", "")
    roots = [named] if named else SEARCH
    prefix = "train" if train else "t10k"
    for root in roots:
        images = find_file(root, f"{prefix}-images-idx3-ubyte")
        labels = find_file(root, f"{prefix}-labels-idx1-ubyte")
        if images and labels:
            x = torch.from_numpy(read_idx(images).astype(np.float32) / 255.0).unsqueeze(1)
            y = torch.from_numpy(read_idx(labels).astype(np.int64))
            return (x - MEAN) / STD, y
    sys.exit(f"chapter2_torch: Fashion-MNIST not found in {roots}")


def make_model(name):
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(inplace=True), nn.Linear(256, 128),
                             nn.ReLU(inplace=True), nn.Linear(128, 10))
    if name == "cnn":
        return nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(inplace=True), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3),
                             nn.ReLU(inplace=True), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(1600, 128),
                             nn.ReLU(inplace=True), nn.Linear(128, 10))
    if name == "resnet50":
        # torchvision's, with a 1-channel stem for Fashion-MNIST, as Lockstep's make_model("resnet50", 1).
        try:
            import torchvision
        except ImportError:
            sys.exit("chapter2_torch: --model resnet50 needs torchvision (tests/reference/resnet50_torchvision.py "
                     "says how to put one beside Debian's torch)")
        model = torchvision.models.resnet50(num_classes=10)
        model.conv1 = nn.Conv2d(1, 64, kernel_size=7, stride=2, padding=3, bias=False)
        nn.init.kaiming_normal_(model.conv1.weight, mode="fan_out", nonlinearity="relu")
        return model
    sys.exit(f"chapter2_torch: unknown model {name} (mlp, cnn or resnet50)")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="cnn")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--data", default="")
    p.add_argument("--max-steps", type=int, default=0)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--tf32", action="store_true", help="on a GPU, let convolutions use TF32 (PyTorch's default)")
    p.add_argument("--amp", default="off", choices=["off", "bf16", "f16"], help="autocast dtype (off: f32)")
    a = p.parse_args()
    if a.amp == "f16" and a.device == "cpu":
        sys.exit("chapter2_torch: --amp f16 on the CPU: PyTorch 1.13's CPU autocast supports only bf16")
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit("chapter2_torch: --device cuda, but this PyTorch sees no CUDA device")
    torch.backends.cudnn.allow_tf32 = a.tf32

    torch.manual_seed(a.seed)
    torch.set_num_threads(a.threads)
    device = torch.device(a.device)
    train_x, train_y = load(a.data, True)
    test_x, test_y = load(a.data, False)
    model = make_model(a.model).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    shuffle = torch.Generator().manual_seed(a.seed)
    on_gpu = device.type == "cuda"
    amp_dtype = {"bf16": torch.bfloat16, "f16": torch.float16}.get(a.amp)
    # f16 needs loss scaling; bf16 (f32's exponent range) does not. Disabled, it passes through.
    scaler = torch.cuda.amp.GradScaler(enabled=a.amp == "f16")

    def autocast():
        # The forward pass's region, as in chapter5; a no-op context for f32.
        if amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device.type, dtype=amp_dtype)

    def to_device(t):
        # On a GPU, like chapter2's DataLoader(pin_memory) and to(device, non_blocking=true).
        return t.pin_memory().to(device, non_blocking=True) if on_gpu else t

    def synchronize():
        # GPU work is only queued: wait for it before reading a clock.
        if on_gpu:
            torch.cuda.synchronize(device)

    device_name = "cuda:0" if on_gpu else "cpu"  # as ./chapter2 writes it
    steps, train_seconds, loss_value, acc = 0, 0.0, float("nan"), 0.0
    samples = 0
    for epoch in range(1, a.epochs + 1):
        model.train()
        order = torch.randperm(len(train_x), generator=shuffle)
        # The epoch's mean training loss, as ./chapter2 reports it: summed on the device and read
        # once at the end (reading it every step would make the CPU wait for the GPU).
        loss_sum, epoch_steps = torch.zeros((), device=device), 0
        synchronize()
        start = time.perf_counter()
        for i in range(0, len(order), a.batch_size):
            idx = order[i:i + a.batch_size]
            x, y = to_device(train_x[idx]), to_device(train_y[idx])
            with autocast():
                loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            loss_sum += loss.detach().float()
            epoch_steps += 1
            samples += len(idx)
            steps += 1
            if a.max_steps and steps >= a.max_steps:
                break
        synchronize()
        epoch_seconds = time.perf_counter() - start  # training only, as chapter2 measures it
        loss_value = loss_sum.item() / epoch_steps
        train_seconds += epoch_seconds
        model.eval()
        correct, test_loss_sum = 0, 0.0
        with torch.no_grad(), autocast():
            for i in range(0, len(test_x), 1000):
                logits, y = model(to_device(test_x[i:i + 1000])), to_device(test_y[i:i + 1000])
                test_loss_sum += F.cross_entropy(logits.float(), y, reduction="sum").item()
                correct += (logits.argmax(1) == y).sum().item()
        acc = correct / len(test_x)
        print(f"epoch {epoch}: train_loss {loss_value:.4f} test_loss {test_loss_sum / len(test_x):.4f} "
              f"test_acc {acc:.4f} epoch_s {epoch_seconds:.2f}")
        if a.max_steps and steps >= a.max_steps:
            break
    print(f"RESULT chapter=2 model={a.model} device={device_name} world=1 epochs={epoch} batch={a.batch_size} "
          f"samples_per_s={samples / train_seconds:.1f} epoch_s={train_seconds / epoch:.3f} test_acc={acc:.4f} "
          f"final_loss={loss_value:.4f} amp={a.amp} framework=pytorch-{torch.__version__}")


if __name__ == "__main__":
    main()
