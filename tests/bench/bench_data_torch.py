"""torchvision baseline for tests/bench/bench_data.sh: RandomResizedCrop(224)
+ RandomHorizontalFlip + ToTensor + Normalize on PIL-decoded JPEGs, the
ImageNet training transform.  Usage: bench_data_torch.py DIR SECONDS WORKERS
Prints "img/s R img/cpu-s C" (CPU time of this process and its workers)."""
import os, resource, sys, time
import torch
import torchvision
import torchvision.transforms as T

torch.set_num_threads(2)


def cpu_s():
    a = resource.getrusage(resource.RUSAGE_SELF)
    b = resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def main():
    root, secs, workers = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    ds = torchvision.datasets.ImageFolder(os.path.join(root, "train"), transform=tf)
    if workers == 0:
        torch.set_num_threads(1)
        c0, t0, n = cpu_s(), time.monotonic(), 0
        while time.monotonic() - t0 < secs:
            ds[n % len(ds)]
            n += 1
        t, c = time.monotonic() - t0, cpu_s() - c0
    else:
        dl = torch.utils.data.DataLoader(ds, batch_size=32, shuffle=True, num_workers=workers,
                                         persistent_workers=True, drop_last=True)
        it = iter(dl)
        next(it)  # start the workers before timing
        c0, t0, n = cpu_s(), time.monotonic(), 0
        while time.monotonic() - t0 < secs:
            try:
                x, _ = next(it)
            except StopIteration:
                it = iter(dl)
                continue
            n += x.shape[0]
        t = time.monotonic() - t0
        del it, dl  # the workers' CPU time is counted once they are reaped
        c = cpu_s() - c0
    print(f"img/s {n / t:.1f} img/cpu-s {n / c:.1f}")


if __name__ == "__main__":
    main()
