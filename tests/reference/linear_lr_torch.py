#!/usr/bin/env python3
"""The learning rates of torch.optim.lr_scheduler.LinearLR, the reference for Lockstep's LinearLR
(src/optim/lr_scheduler.h; tests/unit/test_lr_scheduler.cpp quotes this script's output).

Run with Debian's PyTorch (python3-torch): /usr/bin/python3 tests/reference/linear_lr_torch.py

For each case it builds SGD with learning rate `lr` and a LinearLR, then prints, for the step
count t = 0 (after construction) to `steps`, two learning rates as Python writes a float64 (the
shortest text that reads back to the same bits):
  chained   scheduler.get_last_lr() after scheduler.step(): what PyTorch trains with, each rate
            computed from the previous one (the chainable form);
  closed    scheduler._get_closed_form_lr(): lr * (start + (end - start) * min(t, total) / total),
            the form Lockstep computes, which cannot drift along the chain.
Last, one case's state_dict() after 3 steps, for the names Lockstep's state dict keeps.
"""
import torch

CASES = [
    # (name, lr, start_factor, end_factor, total_iters, steps)
    ("defaults", 0.05, 1.0 / 3, 1.0, 5, 7),              # PyTorch's default factors and length
    ("goyal", 0.4, 1.0 / 8, 1.0, 10, 12),                # 0.05 -> 0.4, the warm-up of Goyal et al.
    ("decay", 0.1, 1.0, 0.1, 4, 6),                      # a linear decay: end below start
]


def scheduler_for(lr, start, end, total):
    param = torch.zeros(1, requires_grad=True)
    optimizer = torch.optim.SGD([param], lr=lr)
    return optimizer, torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=start, end_factor=end,
                                                        total_iters=total)


def main():
    print(f"torch {torch.__version__}")
    for name, lr, start, end, total, steps in CASES:
        optimizer, scheduler = scheduler_for(lr, start, end, total)
        print(f"case {name}: lr={lr!r} start_factor={start!r} end_factor={end!r} total_iters={total}")
        for t in range(steps + 1):
            if t > 0:
                optimizer.step()  # the order PyTorch asks for: optimiser first, then scheduler
                scheduler.step()
            print(f"  t={t} chained={scheduler.get_last_lr()[0]!r} closed={scheduler._get_closed_form_lr()[0]!r}")
    optimizer, scheduler = scheduler_for(0.4, 1.0 / 8, 1.0, 10)
    for _ in range(3):
        optimizer.step()
        scheduler.step()
    state = scheduler.state_dict()
    print("state_dict after 3 steps: " + ", ".join(f"{k}={state[k]!r}" for k in
                                                      ("last_epoch", "base_lrs", "start_factor", "end_factor",
                                                       "total_iters")))


if __name__ == "__main__":
    main()
