"""Where a PyTorch eager training step of a torchvision ResNet spends its
device time, by the same parts as dljob's `bench_gpu --profile 1` (conv, bn,
add/relu, maxpool, fc, optimizer, other), so the two tables can be read side
by side.  Not part of make check.

    python3 tests/bench/profile_torch.py [--model resnet50] [--batch 256] [--size 224]
                                         [--precision bf16|fp32] [--steps 5] [--device cuda]

On a GPU machine: eager AMP, channels_last, cudnn.benchmark, as bench_gpu.py.
--device cpu (tiny sizes) only checks that the script runs.  Kernel names are
matched by substrings; what matches nothing is "other" and its ten largest
kernels are listed, so a new name shows instead of vanishing."""
import argparse
import collections
import sys

import torch
import torchvision
from torch.profiler import ProfilerActivity, profile

PARTS = [  # first match wins; lower-case substrings of kernel / op names
    ("bn", ("batch_norm", "batchnorm", "bn_fw", "bn_bw", "welford")),
    ("conv", ("conv", "cudnn", "sm90_xmma", "xmma", "implicit_gemm", "wgrad", "dgrad", "fprop", "winograd")),
    ("fc", ("gemm", "addmm", "cublas", "matmul", "aten::mm", "cutlass")),
    ("maxpool", ("max_pool", "maxpool")),
    ("add/relu", ("relu", "threshold", "functor_add", "aten::add", "add_kernel", "clamp")),
    ("optimizer", ("sgd", "foreach", "multi_tensor", "mul_", "lerp")),
    ("loss", ("softmax", "nll", "cross_entropy", "log_softmax")),
]


def part_of(name):
    n = name.lower()
    for part, keys in PARTS:
        if any(k in n for k in keys):
            return part
    return "other"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--precision", default="bf16", choices=["bf16", "fp32"])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    cuda = a.device == "cuda"
    if cuda and not torch.cuda.is_available():
        print("profile_torch: no CUDA device")
        return 77
    if cuda:
        torch.backends.cudnn.benchmark = True
        # fp32 as dljob runs it: TF32 off (PyTorch allows it in cuDNN convolutions by default)
        torch.backends.cudnn.allow_tf32 = a.precision != "fp32"
        torch.backends.cuda.matmul.allow_tf32 = False
    model = getattr(torchvision.models, a.model)(num_classes=1000).to(a.device)
    model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-5)
    x = torch.randn(a.batch, 3, a.size, a.size, device=a.device).to(memory_format=torch.channels_last)
    y = torch.arange(a.batch, device=a.device) % 1000
    lossf = torch.nn.CrossEntropyLoss()
    amp = a.precision == "bf16" and cuda

    def step():
        opt.zero_grad(set_to_none=True)
        if amp:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = lossf(model(x), y)
        else:
            loss = lossf(model(x), y)
        loss.backward()
        opt.step()

    for _ in range(3):  # warm-up: cudnn.benchmark's search, allocator
        step()
    if cuda:
        torch.cuda.synchronize()
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=acts) as prof:
        for _ in range(a.steps):
            step()
        if cuda:
            torch.cuda.synchronize()
    # device time per kernel (CUDA) or self CPU time per op (cpu check)
    per_part = collections.Counter()
    other = collections.Counter()
    for e in prof.key_averages():
        # torch >= 2.4 names the GPU time self_device_time_total
        t = (getattr(e, "self_device_time_total", None) or getattr(e, "self_cuda_time_total", 0)) if cuda \
            else e.self_cpu_time_total
        if t <= 0 or (cuda and e.device_type != torch.autograd.DeviceType.CUDA):
            continue
        p = part_of(e.key)
        per_part[p] += t / 1e3 / a.steps  # us -> ms per step
        if p == "other":
            other[e.key] += t / 1e3 / a.steps
    total = sum(per_part.values())
    print(f"profile_torch: {a.model} batch {a.batch} {a.size}x{a.size} {a.precision}, torch {torch.__version__}, "
          f"{'device' if cuda else 'cpu (check only)'} ms per step over {a.steps} steps: {total:.3f}")
    for p, t in per_part.most_common():
        print(f"profile_torch: {p:10s} {t:9.3f} ms {100 * t / total:5.1f}%")
    for k, t in other.most_common(10):
        print(f"profile_torch:   other: {t:8.3f} ms  {k[:100]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
