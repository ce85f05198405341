"""torchvision's ResNet-50 as the reference for Lockstep's (src/nn/resnet50.h).

Prints what tests/unit/test_resnet50.cpp checks: the parameter count of resnet50(num_classes=10)
for 3-channel and 1-channel input (the 1-channel model swaps conv1 for a 1-channel one, as one
adapts torchvision to grayscale), the number of state_dict entries and a few keys, output shapes
for CIFAR-10 and Fashion-MNIST batches, and the training-mode logits of the f64 model after every
floating-point tensor of its state_dict is filled with 0.5 sin(0.37 i + 1.3 k) (k counts those
tensors; running variances 1 + that squared) for the input x[i] = sin(0.11 i) of shape
(2, 3, 32, 32). Evaluation mode, because in training mode BatchNorm normalises layer4's
channels over 2 values each (2 images of 1 x 1 pixels), which amplifies rounding: PyTorch itself
moves in the fourth digit when the same model runs channels_last.

Run with Debian's python3-torch and a torchvision that fits it, e.g.
    pip install --no-deps --target /tmp/tvlib torchvision==0.15.2
    PYTHONPATH=/tmp/tvlib /usr/bin/python3 tests/reference/resnet50_torchvision.py
(torchvision 0.15's models import with torch 1.13; its image extension does not, which the
models do not need.)
"""
import math
import sys

import torch

try:
    import torchvision
except ImportError:
    sys.exit("needs torchvision (see this script's docstring for how to put one beside Debian's torch)")


def resnet50(in_channels):
    model = torchvision.models.resnet50(num_classes=10)
    if in_channels != 3:
        model.conv1 = torch.nn.Conv2d(in_channels, 64, kernel_size=7, stride=2, padding=3, bias=False)
    return model


def fill_deterministic(model):
    k = 0
    with torch.no_grad():
        for key, t in model.state_dict().items():
            if not t.is_floating_point():
                continue
            i = torch.arange(t.numel(), dtype=torch.float64)
            v = 0.5 * torch.sin(0.37 * i + 1.3 * k)
            if key.endswith("running_var"):
                v = 1 + v * v
            t.copy_(v.reshape(t.shape))
            k += 1


def main():
    print("torch", torch.__version__, "torchvision", torchvision.__version__)
    for channels, shape in ((3, (2, 3, 32, 32)), (1, (2, 1, 28, 28))):
        model = resnet50(channels)
        state = model.state_dict()
        print(f"in_channels {channels}: {sum(p.numel() for p in model.parameters())} parameters, "
              f"{len(state)} state_dict entries, {len(list(model.buffers()))} buffers, "
              f"output {tuple(model(torch.zeros(shape)).shape)} for input {shape}")
    keys = list(resnet50(3).state_dict().keys())
    print("keys 0-7:", keys[:8])
    print("keys 30-37:", keys[30:38])
    print("last keys:", keys[-4:])

    model = resnet50(3).double()
    fill_deterministic(model)
    x = torch.sin(0.11 * torch.arange(2 * 3 * 32 * 32, dtype=torch.float64)).reshape(2, 3, 32, 32)
    logits = model.eval()(x)
    print("evaluation-mode logits:", ", ".join(f"{v:.12g}" for v in logits.flatten().tolist()))


if __name__ == "__main__":
    main()
