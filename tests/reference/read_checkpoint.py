#!/usr/bin/env python3
"""Reads a Lockstep checkpoint with PyTorch's `safetensors` package, to show that it is a plain
safetensors file: the tensors load with safetensors.torch.load_file, and the training state is
JSON in the header's __metadata__ (see src/io/checkpoint.h for the layout).

    python3 tests/reference/read_checkpoint.py ckpt.safetensors

It prints the metadata (format, training position, world size, sampler, generators shortened,
optimizer hyper-parameters, scaler) and every tensor's name, dtype and shape, then checks what a
reader can check on its own: the format name and version, that the model fingerprint matches the
"model." tensors, and the FNV-1a 64 checksum of the tensors and the metadata. Exit status: 0 when
all is well, 1 when a check fails, 77 (CTest's skip code) when torch or safetensors is not
installed:
    pip install safetensors     (Debian: python3 -m pip install --break-system-packages safetensors)
"""
import json
import struct
import sys


def fnv1a64(fields):
    """FNV-1a, 64 bits, over byte strings in order, each preceded by its length as 8 bytes, least
    significant first (so that fields cannot run into each other)."""
    h = 0xCBF29CE484222325
    for field in fields:
        for b in len(field).to_bytes(8, "little") + field:
            h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def checksum_fields(path):
    """What save_checkpoint's "checksum" covers (checkpoint_checksum in src/io/checkpoint.h), read
    straight from the file without safetensors: every tensor in the order of its data in the file
    (its name, dtype as Lockstep names it, shape as "[2, 3]", raw bytes), then every metadata key
    and value but "checksum" itself, in key order."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        base = 8 + n
        metadata = header.pop("__metadata__", {})
        for name, info in sorted(header.items(), key=lambda item: tuple(item[1]["data_offsets"])):
            begin, end = info["data_offsets"]
            f.seek(base + begin)
            shape = "[" + ", ".join(str(d) for d in info["shape"]) + "]"
            yield from (name.encode(), info["dtype"].lower().encode(), shape.encode(), f.read(end - begin))
    for key in sorted(metadata, key=lambda k: k.encode()):
        if key != "checksum":
            yield from (key.encode(), metadata[key].encode())


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[4].strip(), file=sys.stderr)
        return 2
    path = argv[1]
    try:
        import torch  # noqa: F401  (safetensors.torch needs it)
        from safetensors import safe_open
        from safetensors.torch import load_file
    except ImportError as e:
        print(f"read_checkpoint.py: skipped: {e}; install it with: pip install safetensors "
              "(on Debian, whose Python refuses a plain pip install: "
              "python3 -m pip install --break-system-packages safetensors; torch: apt-get install python3-torch)")
        return 77

    tensors = load_file(path)  # what PyTorch users call: every tensor, as torch tensors
    with safe_open(path, framework="pt") as f:
        metadata = f.metadata() or {}

    problems = []
    if metadata.get("format") != "lockstep.checkpoint":
        print(f"{path}: not a Lockstep checkpoint (no \"format\": \"lockstep.checkpoint\" in its metadata)")
        return 1
    print(f"{path}: {metadata['format']} version {metadata.get('format_version')}, "
          f"torch {torch.__version__}, {len(tensors)} tensors")
    for key in sorted(metadata):
        if key in ("format", "format_version", "model"):
            continue
        value = json.loads(metadata[key]) if key != "checksum" else metadata[key]
        if key == "generators":  # 313 numbers each: show the start only
            value = {"default": [s[:40] + "..." for s in value["default"]],
                     "named": {k: s[:40] + "..." for k, s in value["named"].items()}}
        print(f"  {key}: {json.dumps(value)}")

    print("  tensors:")
    for name, t in tensors.items():
        print(f"    {name:40s} {str(t.dtype):15s} {list(t.shape)}")

    # The model fingerprint names the "model." tensors exactly.
    fingerprint = json.loads(metadata["model"])
    torch_dtypes = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
                    "i64": torch.int64, "i32": torch.int32, "u8": torch.uint8, "bool": torch.bool}
    for name, dtype, shape in fingerprint:
        t = tensors.get("model." + name)
        if t is None:
            problems.append(f"the fingerprint lists {name!r} but there is no tensor 'model.{name}'")
        elif list(t.shape) != shape or torch_dtypes.get(dtype) != t.dtype:
            problems.append(f"'model.{name}' is {t.dtype} {list(t.shape)}, the fingerprint says {dtype} {shape}")
    model_names = {n[len("model."):] for n in tensors if n.startswith("model.")}
    if model_names != {entry[0] for entry in fingerprint}:
        problems.append("the 'model.' tensors and the fingerprint list different names")

    expected = metadata.get("checksum", "")
    got = "fnv1a64:%016x" % fnv1a64(checksum_fields(path))
    if expected != got:
        problems.append(f"checksum {got} does not match the saved {expected}")
    else:
        print(f"  checksum {got}: matches")

    for p in problems:
        print(f"{path}: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
