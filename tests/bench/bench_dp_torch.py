#!/usr/bin/python3
"""PyTorch side of tests/bench/bench_dp.sh: DistributedDataParallel over gloo
(25 MB buckets, the default) under srun, one compute thread per rank, the
same model and synthetic input shape as the dljob run beside it.
Usage (one process per rank, Slurm's variables give rank and size):
  bench_dp_torch.py MODEL C H W CLASSES BATCH STEPS WARMUP
Rank 0 prints one line: "torch-ddp MODEL ranks=R: img/s X per rank Y
(median step S ms) peak_rss_kib K", X over all ranks."""
import datetime
import os
import resource
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "engine"))
from test_torchvision import CifarResNet  # noqa: E402  (the CIFAR nets as the engine builds them)


def main():
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "1")))
    name, c, h, w, k, n, steps, warmup = sys.argv[1], *map(int, sys.argv[2:9])
    rank = int(os.environ.get("SLURM_PROCID", "0"))
    size = int(os.environ.get("SLURM_NTASKS", "1"))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if size > 1:
        dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=size,
                                timeout=datetime.timedelta(seconds=300))
    torch.manual_seed(1)
    if name in ("resnet20", "resnet32", "resnet56"):
        m = CifarResNet({"resnet20": 3, "resnet32": 5, "resnet56": 9}[name], k, c)
    else:
        m = torchvision.models.__dict__[name](num_classes=k)
        if c != 3:
            m.conv1 = nn.Conv2d(c, 64, 7, 2, 3, bias=False)
    m = m.to(memory_format=torch.channels_last).train()
    if size > 1:
        m = nn.parallel.DistributedDataParallel(m)
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    crit = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(n, c, h, w, generator=g).to(memory_format=torch.channels_last)
    y = torch.arange(n) % k
    times = []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        crit(m(x), y).backward()
        opt.step()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    # The slowest rank sets the pace: the mean step time over ranks.
    t = torch.tensor([sum(times) / len(times)], dtype=torch.float64)
    if size > 1:
        dist.all_reduce(t)
        t /= size
    times.sort()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if rank == 0:
        per_rank = n / t.item()
        print(f"torch-ddp {name} ranks={size}: img/s {per_rank * size:.2f} per rank {per_rank:.2f} "
              f"(median step {times[len(times) // 2] * 1e3:.1f} ms) peak_rss_kib {rss}", flush=True)
    if size > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
