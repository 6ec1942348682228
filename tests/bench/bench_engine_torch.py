#!/usr/bin/python3
"""PyTorch side of tests/bench/bench_engine.sh: the same training step
(forward, cross-entropy, backward, SGD momentum) on random data, channels_last,
2 threads.  Usage: bench_engine_torch.py MODEL C H W CLASSES BATCH [STEPS [WARMUP]]
BENCH_PRECISION=bf16: forward and loss under torch.autocast("cpu", bfloat16)."""
import contextlib
import os
import resource
import sys
import time

import torch
import torch.nn as nn
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "engine"))
from test_torchvision import CifarResNet  # noqa: E402  (the CIFAR nets as the engine builds them)


def main():
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "2")))
    name, c, h, w, k, n = sys.argv[1], *map(int, sys.argv[2:7])
    steps = int(sys.argv[7]) if len(sys.argv) > 7 else 7
    warmup = int(sys.argv[8]) if len(sys.argv) > 8 else 2
    if name in ("resnet20", "resnet32", "resnet56"):
        m = CifarResNet({"resnet20": 3, "resnet32": 5, "resnet56": 9}[name], k, c)
    else:
        m = torchvision.models.__dict__[name](num_classes=k)
        if c != 3:
            m.conv1 = nn.Conv2d(c, 64, 7, 2, 3, bias=False)
    m = m.to(memory_format=torch.channels_last).train()
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    crit = nn.CrossEntropyLoss()
    x = torch.randn(n, c, h, w).to(memory_format=torch.channels_last)
    y = torch.arange(n) % k
    bf16 = os.environ.get("BENCH_PRECISION") == "bf16"
    amp = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if bf16 else contextlib.nullcontext
    times = []
    cpu0 = 0.0
    for i in range(warmup + steps):
        if i == warmup:
            cpu0 = time.process_time()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with amp():
            loss = crit(m(x), y)
        loss.backward()
        opt.step()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    cpu = time.process_time() - cpu0
    times.sort()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"torch{' bf16' if bf16 else ''} {name} {n}x{c}x{h}x{w}: median {n / times[steps // 2]:.2f} img/s "
          f"(min {n / times[-1]:.2f} max {n / times[0]:.2f}, {steps} steps) {n * steps / cpu:.2f} img/cpu-s "
          f"peak_rss_kib {rss}")


if __name__ == "__main__":
    main()
