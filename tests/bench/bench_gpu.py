"""PyTorch reference for tests/bench/bench_gpu.sh: ResNet training img/s on
synthetic data resident in GPU memory, same protocol as bench_gpu.c (SGD
momentum, median step time over CUDA events after warm-up).  Modes: eager
AMP (bf16 or fp16) or fp32 with TF32 off as dljob's fp32, channels_last, and
the same under torch.compile when it works.
Prints one JSON line per mode; a mode that fails prints {"error": ...}."""
import argparse
import json
import statistics
import sys

import torch
import torchvision


def bench(mode, args):
    torch.manual_seed(0)
    model = getattr(torchvision.models, args.model)(num_classes=1000)
    model = model.cuda().to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-5)
    x = torch.randn(args.batch, 3, args.size, args.size, device="cuda").to(memory_format=torch.channels_last)
    y = torch.arange(args.batch, device="cuda") % 1000
    lossf = torch.nn.CrossEntropyLoss()
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.precision)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
            loss = lossf(model(x), y)
        loss.backward()
        opt.step()
        return loss

    fn = torch.compile(step) if mode == "compile" else step
    torch.cuda.reset_peak_memory_stats()
    for _ in range(args.warmup):
        loss = fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(args.steps):
        e0 = torch.cuda.Event(enable_timing=True)
        e1 = torch.cuda.Event(enable_timing=True)
        e0.record()
        loss = fn()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1))
    med = statistics.median(times)
    return {
        "engine": "pytorch-" + mode, "model": args.model, "batch": args.batch, "size": args.size,
        "precision": args.precision, "step_ms_median": round(med, 3), "step_ms_min": round(min(times), 3),
        "img_per_s": round(args.batch / (med * 1e-3), 1), "final_loss": round(float(loss), 4),
        "peak_mem_gib": round(torch.cuda.max_memory_allocated() / 2**30, 3),
        "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
        "tf32": bool(torch.backends.cudnn.allow_tf32) if args.precision == "fp32" else None,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--precision", default="bf16", choices=["bf16", "fp16", "fp32"])
    ap.add_argument("--modes", default="eager,compile")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print(json.dumps({"engine": "pytorch", "error": "no CUDA device for PyTorch"}))
        return 77
    torch.backends.cudnn.benchmark = True
    # fp32 as dljob runs it: true fp32, TF32 off (PyTorch allows TF32 in
    # cuDNN convolutions by default, which would compare another precision)
    if args.precision == "fp32":
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    for mode in args.modes.split(","):
        try:
            print(json.dumps(bench(mode, args)), flush=True)
        except Exception as e:  # torch.compile may be unavailable (no triton, no compiler)
            print(json.dumps({"engine": "pytorch-" + mode, "error": str(e).splitlines()[0][:300]}), flush=True)
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
