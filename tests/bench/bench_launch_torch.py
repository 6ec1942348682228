#!/usr/bin/python3
"""The PyTorch side of tests/bench/bench_launch.sh: what a torch training
script does before its first step under srun: import torch and torchvision,
init_process_group("gloo") from Slurm's variables, one allreduce ("ready"),
then (with --step) one DDP step on a batch of 8: resnet20 (the CIFAR-style
net, defined here as torchvision has none) on 1x28x28 like dljob's
Fashion-MNIST run, or with --resnet18 torchvision's resnet18 at 3x32x32.
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


def resnet20():
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = torch.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return torch.relu(y + (self.down(x) if self.down is not None else x))

    layers = [nn.Conv2d(1, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU()]
    cin = 16
    for stage, cout in enumerate((16, 32, 64)):
        for i in range(3):
            layers.append(Block(cin, cout, 2 if (i == 0 and stage > 0) else 1))
            cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)]
    return nn.Sequential(*layers)


if "--step" in sys.argv:
    torch.manual_seed(0)
    if "--resnet18" in sys.argv:
        model, shape = torchvision.models.resnet18(num_classes=10), (8, 3, 32, 32)
    else:
        model, shape = resnet20(), (8, 1, 28, 28)
    if size > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    xb = torch.randn(*shape)
    yb = torch.randint(0, 10, (8,))
    loss = torch.nn.functional.cross_entropy(model(xb), yb)
    loss.backward()
    opt.step()
    print(f"torch: step1 rank={rank} wall={time.time():.6f} loss={loss.item():.4f}", flush=True)
if size > 1:
    dist.destroy_process_group()
