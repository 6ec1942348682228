#!/usr/bin/python3
"""The PyTorch side of tests/bench/bench_launch.sh: what a torch training
script does before its first step under srun: import torch and torchvision,
init_process_group("gloo") from Slurm's variables, one allreduce ("ready"),
then (with --step) one DDP step of resnet18 on a batch of 8 at 32x32.
Prints "torch: ready wall=<epoch s>" and "torch: step1 wall=<epoch s>"."""
import os
import sys
import time

import torch
import torch.distributed as dist
import torchvision

torch.set_num_threads(2)
rank = int(os.environ["SLURM_PROCID"])
size = int(os.environ["SLURM_NTASKS"])
os.environ.setdefault("MASTER_ADDR", "n1")
if size > 1:
    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=size,
                            timeout=__import__("datetime").timedelta(seconds=60))
x = torch.full((1000,), float(rank + 1))
if size > 1:
    dist.all_reduce(x)
assert x[0].item() == size * (size + 1) / 2, x[0].item()
print(f"torch: ready rank={rank} wall={time.time():.6f}", flush=True)
if "--step" in sys.argv:
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10)
    if size > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    xb = torch.randn(8, 3, 32, 32)
    yb = torch.randint(0, 10, (8,))
    loss = torch.nn.functional.cross_entropy(model(xb), yb)
    loss.backward()
    opt.step()
    print(f"torch: step1 rank={rank} wall={time.time():.6f} loss={loss.item():.4f}", flush=True)
if size > 1:
    dist.destroy_process_group()
