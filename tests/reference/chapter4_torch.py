#!/usr/bin/env python3
"""The same workload as chapter4, in PyTorch: DistributedDataParallel on the CPU, for speed and accuracy.

Same data, models and initialisation scheme as chapter2_torch.py (imported from beside this
file); as in ./chapter4: N processes (here started by torch.multiprocessing, with the gloo
backend over the loopback interface, where chapter4 uses mpirun and MPI), each with its own
seed for the initial weights that DDP then replaces with rank 0's, a DistributedSampler that
reshuffles every epoch with set_epoch, a batch of --batch-size per rank, SGD with momentum, the
machine's cores shared between the ranks, and the test set split between the ranks with the
sums all-reduced. Prints rank 0's line per epoch and a final `RESULT chapter=4 ...` line in the
same format as ./chapter4; samples_per_s counts the samples of all ranks.

Run with Debian's PyTorch (python3-torch): /usr/bin/python3 tests/reference/chapter4_torch.py --world 2
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data.distributed import DistributedSampler

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chapter2_torch import load, make_model  # noqa: E402  (the same data and models)


def run(rank, a):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(a.port))
    # [ddp setup]
    dist.init_process_group("gloo", rank=rank, world_size=a.world)
    torch.set_num_threads(a.threads or max(1, os.cpu_count() // a.world))
    train_x, train_y = load(a.data, True)
    test_x, test_y = load(a.data, False)

    # Each rank starts from its own weights; DDP's constructor broadcasts rank 0's.
    torch.manual_seed(a.seed + rank)
    ddp = DistributedDataParallel(make_model(a.model))
    opt = torch.optim.SGD(ddp.parameters(), lr=a.lr, momentum=a.momentum)
    sampler = DistributedSampler(range(len(train_x)), num_replicas=a.world, rank=rank, shuffle=True, seed=a.seed)
    test_shard = list(DistributedSampler(range(len(test_x)), num_replicas=a.world, rank=rank, shuffle=False))
    # [ddp setup]

    steps, samples, train_seconds, loss_value, acc = 0, 0, 0.0, float("nan"), 0.0
    # [ddp loop]
    for epoch in range(1, a.epochs + 1):
        ddp.train()
        sampler.set_epoch(epoch - 1)
        order = torch.tensor(list(sampler))
        dist.barrier()
        start = time.perf_counter()
        for i in range(0, len(order), a.batch_size):
            idx = order[i:i + a.batch_size]
            loss = F.cross_entropy(ddp(train_x[idx]), train_y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            # [ddp loop]
            samples += len(idx) * a.world
            steps += 1
            if a.max_steps and steps >= a.max_steps:
                break
        dist.barrier()
        epoch_seconds = time.perf_counter() - start  # training only, as chapter4 measures it
        train_seconds += epoch_seconds
        loss_value = loss.item()
        # Evaluation: each rank its shard, the sums all-reduced (as chapter4 does).
        ddp.eval()
        totals = torch.zeros(2, dtype=torch.float64)
        with torch.no_grad():
            for i in range(0, len(test_shard), 1000):
                idx = test_shard[i:i + 1000]
                totals[0] += (ddp.module(test_x[idx]).argmax(1) == test_y[idx]).sum().item()
                totals[1] += len(idx)
        dist.all_reduce(totals)
        acc = (totals[0] / totals[1]).item()
        if rank == 0:
            print(f"epoch {epoch}: train_loss {loss_value:.4f} test_acc {acc:.4f} epoch_s {epoch_seconds:.2f}",
                  flush=True)
        if a.max_steps and steps >= a.max_steps:
            break
    if rank == 0:
        print(f"RESULT chapter=4 model={a.model} device=cpu world={a.world} epochs={epoch} batch={a.batch_size} "
              f"samples_per_s={samples / train_seconds:.1f} epoch_s={train_seconds / epoch:.3f} test_acc={acc:.4f} "
              f"final_loss={loss_value:.4f} backend=gloo threads={torch.get_num_threads()} "
              f"framework=pytorch-{torch.__version__}", flush=True)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--world", type=int, default=2, help="processes (ranks) to start")
    p.add_argument("--model", default="cnn")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64, help="per rank")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="per rank (default: cores / world)")
    p.add_argument("--data", default="")
    p.add_argument("--max-steps", type=int, default=0)
    p.add_argument("--port", type=int, default=29511)
    a = p.parse_args()
    mp.spawn(run, args=(a,), nprocs=a.world)


if __name__ == "__main__":
    main()
