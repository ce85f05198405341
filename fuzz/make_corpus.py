#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into fuzz/corpus/<target>/: for each reader a
few valid inputs and a few that are almost valid (one field wrong, one byte short, one too
many), from which the fuzzer's mutations start. The files are committed; rerun this script
after changing it (it replaces the folders' contents) and commit what it writes.

Each input is laid out as its target expects (fuzz/fuzz_<target>.cpp): idx and cifar10 start
with one byte of options, safetensors is the file itself, launch is NAME=VALUE lines, checkpoint
is KEY=VALUE lines of a checkpoint's metadata.
"""
import gzip
import json
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    folder = os.path.join(HERE, "corpus", target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def reset(target):
    shutil.rmtree(os.path.join(HERE, "corpus", target), ignore_errors=True)


# gzip.compress with mtime=0, so that the same script always writes the same bytes.
def gz(data):
    return gzip.compress(data, mtime=0)


# --- idx: option byte (bit 0: labels, bit 1: compress first), then the file.
IMAGES, LABELS, COMPRESS = 0, 1, 2


def idx_images(n, rows, cols):
    return struct.pack(">IIII", 0x803, n, rows, cols) + bytes((i * 7) % 256 for i in range(n * rows * cols))


def idx_labels(n):
    return struct.pack(">II", 0x801, n) + bytes(i % 10 for i in range(n))


reset("idx")
write("idx", "images-2x3x4", bytes([IMAGES]) + idx_images(2, 3, 4))
write("idx", "labels-5", bytes([LABELS]) + idx_labels(5))
write("idx", "images-0", bytes([IMAGES]) + idx_images(0, 28, 28))
write("idx", "images-compressed-by-target", bytes([IMAGES | COMPRESS]) + idx_images(1, 4, 4))
write("idx", "labels-gzip-file", bytes([LABELS]) + gz(idx_labels(6)))
write("idx", "images-gzip-file", bytes([IMAGES]) + gz(idx_images(2, 2, 2)))
write("idx", "images-truncated", bytes([IMAGES]) + idx_images(2, 3, 4)[:-1])
write("idx", "images-one-byte-too-many", bytes([IMAGES]) + idx_images(1, 2, 2) + b"\0")
write("idx", "labels-given-to-images", bytes([IMAGES]) + idx_labels(3))
write("idx", "images-huge-header", bytes([IMAGES]) + struct.pack(">IIII", 0x803, 0xFFFFFFFF, 0xFFFFFFFF, 2))
write("idx", "labels-gzip-cut-short", bytes([LABELS]) + gz(idx_labels(40))[:-6])
write("idx", "images-header-cut-short", bytes([IMAGES]) + struct.pack(">III", 0x803, 1, 2))

# --- cifar10: option byte (records per file = 1 + byte % 3), then test_batch.bin.
RECORD = 1 + 3 * 32 * 32


def cifar_records(labels):
    return b"".join(bytes([label]) + bytes((label + i) % 256 for i in range(RECORD - 1)) for label in labels)


reset("cifar10")
write("cifar10", "one-record", bytes([0]) + cifar_records([3]))
write("cifar10", "two-records", bytes([1]) + cifar_records([0, 9]))
write("cifar10", "one-record-gzip", bytes([0]) + gz(cifar_records([7])))
write("cifar10", "label-10", bytes([0]) + cifar_records([10]))
write("cifar10", "one-byte-short", bytes([0]) + cifar_records([1])[:-1])
write("cifar10", "whole-record-too-few", bytes([1]) + cifar_records([2]))
write("cifar10", "empty", bytes([0]))


# --- safetensors: the file itself.
def safetensors(header, data, pad=True):
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


reset("safetensors")
weight = struct.pack("<6f", 0.5, -1.0, 2.0, 0.0, 3.25, -0.125)
bias = struct.pack("<2q", 1, -2)
write("safetensors", "two-tensors-with-metadata", safetensors({
    "__metadata__": {"format": "pt", "step": "10"},
    "fc.weight": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
    "fc.bias": {"dtype": "I64", "shape": [2], "data_offsets": [24, 40]},
}, weight + bias))
write("safetensors", "all-small-dtypes", safetensors({
    "a": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]},
    "b": {"dtype": "BF16", "shape": [1, 1], "data_offsets": [4, 6]},
    "c": {"dtype": "U8", "shape": [3], "data_offsets": [6, 9]},
    "d": {"dtype": "BOOL", "shape": [2], "data_offsets": [9, 11]},
    "e": {"dtype": "I32", "shape": [], "data_offsets": [11, 15]},
    "f": {"dtype": "F64", "shape": [1], "data_offsets": [15, 23]},
}, struct.pack("<2e", 1.0, -2.0) + b"\x80\x3f" + b"\x01\x02\x03" + b"\x00\x01" + struct.pack("<i", 7)
   + struct.pack("<d", 1.5)))
write("safetensors", "empty-tensor", safetensors({"e": {"dtype": "F32", "shape": [0, 4], "data_offsets": [0, 0]}}, b""))
write("safetensors", "no-tensors", safetensors({}, b""))
write("safetensors", "nan", safetensors({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}},
                                         struct.pack("<f", float("nan"))))
write("safetensors", "overlapping", safetensors({
    "a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},
    "b": {"dtype": "U8", "shape": [2], "data_offsets": [1, 3]},
}, b"\0\0\0"))
write("safetensors", "shape-does-not-match", safetensors({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}},
                                                          weight[:4]))
write("safetensors", "bool-byte-2", safetensors({"m": {"dtype": "BOOL", "shape": [1], "data_offsets": [0, 1]}}, b"\x02"))
write("safetensors", "unknown-dtype", safetensors({"w": {"dtype": "F8_E4M3", "shape": [1], "data_offsets": [0, 1]}},
                                                   b"\0"))
write("safetensors", "header-length-too-large", struct.pack("<Q", 1 << 40) + b"{}")
write("safetensors", "nested-100", struct.pack("<Q", 200) + b"[" * 100 + b"]" * 100)
write("safetensors", "duplicate-name", struct.pack("<Q", 96) + (
    b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}'
    + b" " * 96)[:96] + b"\0")

# --- launch: NAME=VALUE lines.
reset("launch")
write("launch", "openmpi", b"OMPI_COMM_WORLD_RANK=1\nOMPI_COMM_WORLD_SIZE=2\nOMPI_COMM_WORLD_LOCAL_RANK=1\n"
                           b"OMPI_COMM_WORLD_LOCAL_SIZE=2\n")
write("launch", "mpich", b"PMI_RANK=0\nPMI_SIZE=4\nMPI_LOCALRANKID=0\nMPI_LOCALNRANKS=2\n")
write("launch", "torchrun", b"RANK=3\nWORLD_SIZE=8\nLOCAL_RANK=3\nLOCAL_WORLD_SIZE=4\n")
write("launch", "slurm-step", b"SLURM_PROCID=5\nSLURM_NTASKS=7\nSLURM_LOCALID=1\nSLURM_NODEID=2\n"
                              b"SLURM_STEP_TASKS_PER_NODE=2(x3),1\nSLURM_TASKS_PER_NODE=4\n")
write("launch", "slurm-batch", b"SLURM_PROCID=0\nSLURM_NTASKS=1\nSLURM_TASKS_PER_NODE=1\n")
write("launch", "slurm-node-beyond-list", b"SLURM_PROCID=0\nSLURM_NTASKS=2\nSLURM_NODEID=3\nSLURM_TASKS_PER_NODE=1(x2)\n")
write("launch", "rank-beyond-world", b"RANK=2\nWORLD_SIZE=2\n")
write("launch", "not-a-number", b"OMPI_COMM_WORLD_RANK=one\nOMPI_COMM_WORLD_SIZE=2\n")
write("launch", "number-too-large", b"PMI_RANK=0\nPMI_SIZE=99999999999999999999\n")
write("launch", "nothing", b"HOME=/root\nPATH=/usr/bin\n")

# --- checkpoint: KEY=VALUE lines of the metadata of fuzz_checkpoint.cpp's small checkpoint
# (Linear(3, 2), SGD with momentum, a LinearLR warm-up, a sampler over 8 samples, a generator
# named "augment"); "@state" stands for a generator's state. The target computes the checksum.
def checkpoint(**changes):
    entries = {
        "format": "lockstep.checkpoint",
        "format_version": "2",
        "world_size": "1",
        "training": {"epoch": 0, "step_in_epoch": 1, "global_step": 1, "batch_size": 4, "samples_in_epoch": 4},
        "model": [["0.weight", "f32", [2, 3]], ["0.bias", "f32", [2]]],
        "optimizer": {"name": "SGD", "num_params": 2,
                      "param_group": {"dampening": 0.0, "lr": 0.05, "maximize": False, "momentum": 0.9,
                                      "nesterov": False, "weight_decay": 0.0}},
        "scaler": None,
        "scheduler": {"name": "LinearLR", "last_epoch": 1, "base_lr": 0.1, "end_factor": 1.0,
                      "start_factor": 0.5, "total_iters": 4.0},
        "sampler": {"seed": 3, "epoch": 0, "dataset_size": 8, "shuffle": True, "drop_last": False},
        "generators": {"default": ["@state"], "named": {"augment": "@state"}},
    }
    entries.update(changes)
    lines = []
    for key, value in entries.items():
        if value is not ...:  # ... leaves the entry out
            lines.append(key + "=" + (value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))))
    return ("\n".join(lines) + "\n").encode()


reset("checkpoint")
write("checkpoint", "valid", checkpoint())
write("checkpoint", "valid-two-ranks", checkpoint(
    world_size="2", training={"epoch": 1, "step_in_epoch": 2, "global_step": 7, "batch_size": 2, "samples_in_epoch": 8},
    generators={"default": ["@state", "@state"], "named": {"augment": "@state"}}))
write("checkpoint", "version-1", checkpoint(format_version="1"))
write("checkpoint", "negative-global-step", checkpoint(
    training={"epoch": 0, "step_in_epoch": 1, "global_step": -1, "batch_size": 4, "samples_in_epoch": 4}))
write("checkpoint", "samples-not-the-product", checkpoint(
    training={"epoch": 0, "step_in_epoch": 1, "global_step": 1, "batch_size": 4, "samples_in_epoch": 5}))
write("checkpoint", "adam", checkpoint(optimizer={
    "name": "Adam", "num_params": 2,
    "param_group": {"amsgrad": False, "betas": [0.9, 0.999], "eps": 1e-08, "lr": 0.001, "maximize": False,
                    "weight_decay": 0.0}}))
write("checkpoint", "negative-momentum", checkpoint(optimizer={
    "name": "SGD", "num_params": 2,
    "param_group": {"dampening": 0.0, "lr": 0.05, "maximize": False, "momentum": -0.5, "nesterov": False,
                    "weight_decay": 0.0}}))
write("checkpoint", "no-scheduler-no-optimizer", checkpoint(scheduler=None, optimizer=None))
write("checkpoint", "start-factor-0", checkpoint(scheduler={
    "name": "LinearLR", "last_epoch": 1, "base_lr": 0.1, "end_factor": 1.0, "start_factor": 0.0, "total_iters": 4.0}))
write("checkpoint", "sampler-over-9", checkpoint(
    sampler={"seed": 3, "epoch": 0, "dataset_size": 9, "shuffle": True, "drop_last": False}))
write("checkpoint", "damaged-generator", checkpoint(generators={"default": ["@state 1"], "named": {"augment": "x"}}))
write("checkpoint", "model-shape-not-numbers", checkpoint(model=[["0.weight", "f32", ["2", 3]], ["0.bias", "f32", [2]]]))
write("checkpoint", "no-training", checkpoint(training=...))
write("checkpoint", "deep-json", checkpoint(training="[" * 50 + "]" * 50))
