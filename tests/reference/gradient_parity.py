#!/usr/bin/env python3
"""Gradient parity with PyTorch, the half written in PyTorch (see gradient_parity.cpp).

Usage: gradient_parity.py MODEL OUT_DIR [DATA_DIR]. Reads the weights Lockstep wrote, computes
the first batch's gradients and three SGD steps in float64, and compares: exits 1 if any
relative difference exceeds 1e-10."""
import json
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from chapter2_torch import load, make_model  # noqa: E402  (same data and models as chapter 2)

DTYPES = {"F64": np.float64, "F32": np.float32, "I64": np.int64}


def read_safetensors(path):
    """Minimal safetensors reader: 8-byte header length, JSON header, raw little-endian data."""
    data = open(path, "rb").read()
    n, = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        array = np.frombuffer(data[8 + n + begin:8 + n + end], dtype=DTYPES[info["dtype"]])
        tensors[name] = torch.from_numpy(array.reshape(info["shape"]).copy())
    return tensors


def relative(a, b):
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-300)).item()


def main():
    name, out = sys.argv[1], sys.argv[2]
    data_dir = sys.argv[3] if len(sys.argv) > 3 else ""
    x, y = load(data_dir, True)
    x, y = x[:64].double(), y[:64]
    model = make_model(name).double()
    model.load_state_dict(read_safetensors(f"{out}/weights.safetensors"))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    ours_grads = read_safetensors(f"{out}/grads.safetensors")
    worst = 0.0
    for step in range(3):
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        if step == 0:
            for key, p in model.named_parameters():
                worst = max(worst, relative(ours_grads[key], p.grad))
                print(f"grad   {key:10} max relative difference {relative(ours_grads[key], p.grad):.2e}")
        optimizer.step()
    for key, value in read_safetensors(f"{out}/after.safetensors").items():
        worst = max(worst, relative(value, model.state_dict()[key]))
        print(f"weight {key:10} after 3 steps, max relative difference {relative(value, model.state_dict()[key]):.2e}")
    print(f"gradient parity ({name}, float64): worst relative difference {worst:.2e}")
    sys.exit(0 if worst < 1e-10 else 1)


if __name__ == "__main__":
    main()
