#!/usr/bin/python3
"""The C engine against torchvision, one training step at a time.

For each case: build the torchvision model with random weights and randomised
BN state, write it and an input batch as safetensors (with a writer of our
own: there is no safetensors package here), run engine/test/engine_step on a
backend, and compare with the same step done by torch in float64, in train
mode: logits, loss, d(loss)/d(logits), every parameter gradient, the updated
BN running stats and num_batches_tracked, and the SGD update of every
parameter.  Each must agree to a relative error below 1e-4 (max |a-b| over the
tensor divided by max |b|), or be no worse than 4x torch's own float32 step
where float32 cannot do better (see SLACK).  The cpu backend runs each case
twice: with direct convolutions (torch's algorithm) and with its default,
Winograd for 3x3 stride-1 layers.  Its gradients behind a ReLU input within
float32 noise of zero may also differ as much as exact arithmetic does for a
slightly nudged input (see WINO_EPS): Winograd rounds differently from torch,
and so, in both runs, does the backend's own batch norm.  Then the state_dict the C side wrote is
loaded into a fresh torchvision model with strict=True.
"""
import copy
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torchvision

torch.set_num_threads(2)
TOL = 1e-4
SLACK = 4.0
WINO_EPS = 1e-5
WINO_TRIES = 6
BUILD = os.environ.get("DLJOB_BUILDDIR", ".")
DRIVER = os.path.join(BUILD, "engine", "test", "engine_step")

DTYPES = {np.dtype("float32"): "F32", np.dtype("float64"): "F64", np.dtype("int64"): "I64"}
NPTYPES = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "I32": np.int32}


def st_write(path, tensors, metadata=None):
    """tensors: name -> numpy array; little-endian, 8-aligned header."""
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, a in tensors.items():
        a = np.ascontiguousarray(a)
        b = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": DTYPES[a.dtype], "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def st_read(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    if (8 + n) % 8:
        raise ValueError(f"{path}: header of {n} bytes leaves the data unaligned")
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    out = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        a = np.frombuffer(raw[8 + n + b:8 + n + end], dtype=np.dtype(NPTYPES[e["dtype"]]).newbyteorder("<"))
        out[name] = a.reshape(e["shape"])
    return out, meta


class BasicBlock(nn.Module):
    """CIFAR ResNet block with option-B shortcut, named like torchvision's."""

    def __init__(self, inp, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(inp, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inp != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inp, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        idt = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + idt)


class CifarResNet(nn.Module):
    def __init__(self, n, num_classes, in_ch):
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.relu = nn.ReLU(inplace=True)
        inp = 16
        for i, planes in enumerate([16, 32, 64]):
            blocks = []
            for j in range(n):
                blocks.append(BasicBlock(inp, planes, 2 if (j == 0 and i > 0) else 1))
                inp = planes
            setattr(self, f"layer{i + 1}", nn.Sequential(*blocks))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def make_model(name, k, in_ch, seed):
    torch.manual_seed(seed)
    if name in ("resnet20", "resnet32", "resnet56"):
        m = CifarResNet({"resnet20": 3, "resnet32": 5, "resnet56": 9}[name], k, in_ch)
    else:
        m = torchvision.models.__dict__[name](num_classes=k)
        if in_ch != 3:
            m.conv1 = nn.Conv2d(in_ch, 64, 7, 2, 3, bias=False)
    # nothing trivially 0 or 1: the C side must really read every BN tensor
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.normal_(0, 0.2)
                mod.running_mean.normal_(0, 0.2)
                mod.running_var.uniform_(0.5, 1.5)
                mod.num_batches_tracked.fill_(7)
    return m


def state_np(m):
    return {k: v.detach().cpu().numpy() for k, v in m.state_dict().items()}


def relerr(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return float("inf")
    scale = np.abs(b).max() if b.size else 0.0
    return float(np.abs(a - b).max() / max(scale, 1e-30)) if b.size else 0.0


def update_err(w0, w1, ref):
    """Relative error of the SGD update w1-w0 against torch's ref-w0, allowing
    the one float32 rounding of the stored weight (an ulp of w), which can be
    comparable to a tiny update."""
    w0 = w0.astype(np.float64)
    d_ref = ref - w0
    ulp = np.spacing(np.maximum(np.abs(w0), np.abs(ref)).astype(np.float32)).astype(np.float64)
    diff = np.maximum(np.abs((w1.astype(np.float64) - w0) - d_ref) - ulp, 0.0)
    scale = np.abs(d_ref).max()
    return float(diff.max() / max(scale, 1e-30))


def torch_step(m, x, y, dtype, lr, momentum, wd, nesterov, label_smoothing, decay_all, steps):
    """The same training step(s) in torch, train mode, in dtype."""
    md = copy.deepcopy(m).to(dtype).train()
    if decay_all:
        groups = [{"params": list(md.parameters())}]
    else:
        named = list(md.named_parameters())
        groups = [{"params": [p for _, p in named if p.ndim > 1]},
                  {"params": [p for _, p in named if p.ndim <= 1], "weight_decay": 0.0}]
    opt = torch.optim.SGD(groups, lr=lr, momentum=momentum, weight_decay=wd, nesterov=nesterov)
    crit = nn.CrossEntropyLoss(label_smoothing=label_smoothing)
    out = {}
    for s in range(steps):
        opt.zero_grad()
        logits = md(x.to(dtype))
        logits.retain_grad()
        loss = crit(logits, y)
        loss.backward()
        if s == steps - 1:
            out["grads"] = {nm: p.grad.detach().double().numpy() for nm, p in md.named_parameters()}
            out["logits"] = logits.detach().double().numpy()
            out["dlogits"] = logits.grad.double().numpy()
            out["loss"] = loss.item()
        opt.step()
    out["after"] = {k: (v.double() if v.is_floating_point() else v).numpy() for k, v in md.state_dict().items()}
    return out


def run_case(tmp, label, name, shape, k, backend, lr=0.1, momentum=0.9, wd=1e-4, nesterov=False,
             label_smoothing=0.0, decay_all=True, steps=1, seed=0, conv_algo=None, sens=None):
    """sens: a dict shared by the runs of one case, which caches the nudged-input
    sensitivity (computed for cpu runs only)."""
    n, c, h, w = shape
    m = make_model(name, k, c, seed)
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(n, c, h, w, generator=g)
    y = torch.randint(0, k, (n,), generator=g)
    wpath, xpath = os.path.join(tmp, f"{label}.w.st"), os.path.join(tmp, f"{label}.xy.st")
    opath, spath = os.path.join(tmp, f"{label}.out.st"), os.path.join(tmp, f"{label}.state.st")
    before = state_np(m)
    st_write(wpath, before)
    st_write(xpath, {"x": x.numpy(), "y": y.numpy().astype(np.int64)})
    cmd = [DRIVER, "--backend", backend, "--model", name, "--weights", wpath, "--input", xpath, "--out", opath,
           "--state", spath, "--lr", repr(lr), "--momentum", repr(momentum), "--wd", repr(wd),
           "--label-smoothing", repr(label_smoothing), "--steps", str(steps)]
    if conv_algo:
        cmd += ["--conv-algo", conv_algo]
    if nesterov:
        cmd.append("--nesterov")
    if not decay_all:
        cmd.append("--no-decay-bn-bias")
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print(f"FAIL {label}: engine_step exited {r.returncode}: {r.stderr.strip()}")
        return False
    got, meta = st_read(opath)

    args = (lr, momentum, wd, nesterov, label_smoothing, decay_all, steps)
    ref = torch_step(m, x, y, torch.float64, *args)
    r32 = torch_step(m, x, y, torch.float32, *args)

    def errors(run):
        """(category, tensor) -> relative error of a torch run against ref."""
        e = {("logits", "logits"): relerr(run["logits"], ref["logits"]),
             ("loss", "loss"): abs(run["loss"] - ref["loss"]) / abs(ref["loss"]),
             ("dlogits", "dlogits"): relerr(run["dlogits"], ref["dlogits"])}
        for nm, gr in ref["grads"].items():
            e[("grad", nm)] = relerr(run["grads"][nm], gr)
        for nm, v in ref["after"].items():
            if nm.endswith("num_batches_tracked"):
                continue
            if nm.endswith("running_mean") or nm.endswith("running_var"):
                e[("running_stats", nm)] = relerr(run["after"][nm], v)
            else:
                e[("param", nm)] = relerr(run["after"][nm], v)
                e[("update", nm)] = update_err(before[nm], run["after"][nm], v)
        return e

    # Per category, the worst tensor.  A tensor passes when its relative error
    # is below TOL, or when torch's own float32 step is just as far from the
    # float64 one (within SLACK times): some gradients are ill-conditioned in
    # float32 whoever computes them (e.g. in resnet50 a 1x1 conv followed by
    # train-mode BN nearly cancels per-channel shifts of its input, so the
    # true gradient of the previous bn3.bias is a small difference of large
    # terms).  torch float32's error is printed next to ours.
    e32 = errors(r32)
    # Winograd convolutions round differently from torch's direct ones (about
    # 1e-6 of the output instead of 1e-7), and the cpu backend's own batch
    # norm (one-pass shifted statistics, fused with the residual add) rounds
    # differently from torch's too; through a deep network either moves a
    # late activation by about 1e-6 of its size.  Where a ReLU input lies
    # that close to zero, the two can take different sides of the kink and
    # the gradients behind it differ by a whole term: such a gradient is not
    # defined to float32 precision (resnet18-2x3x64 has one: layer4.0's
    # residual sum at channel 457 is 3e-6 of its terms).  How far each
    # tensor moves in exact (float64) arithmetic when the input moves by
    # WINO_EPS, worst of WINO_TRIES random nudges, measures that; a cpu run
    # may be SLACK times that far off too.
    if sens is None:
        sens = {}
    esens = sens
    if conv_algo and not esens:
        gen = torch.Generator().manual_seed(seed + 7)
        for _ in range(WINO_TRIES):
            nudge = 1 + WINO_EPS * (2 * torch.rand(x.shape, generator=gen, dtype=torch.float64) - 1)
            for key, e in errors(torch_step(m, x.double() * nudge, y, torch.float64, *args)).items():
                esens[key] = max(esens.get(key, 0.0), e)
    worst = {}

    def note(cat, tname, e):
        ea, es = e32.get((cat, tname), 0.0), esens.get((cat, tname), 0.0)
        lim = max(TOL, SLACK * ea, SLACK * es)
        if cat not in worst or e / lim > worst[cat][0] / worst[cat][2]:
            worst[cat] = (e, tname, lim, ea, es)

    note("logits", "logits", relerr(got["logits"], ref["logits"]))
    note("loss", "loss", abs(float(got["loss"][0]) - ref["loss"]) / abs(ref["loss"]))
    note("dlogits", "dlogits", relerr(got["dlogits"], ref["dlogits"]))
    for nm, gr in ref["grads"].items():
        note("grad", nm, relerr(got["grad." + nm], gr))
    for nm, v in ref["after"].items():
        if nm.endswith("num_batches_tracked"):
            e = 0.0 if int(got["num_batches_tracked"]) == int(v) else float("inf")
            note("num_batches_tracked", nm, e)
        elif nm.endswith("running_mean") or nm.endswith("running_var"):
            note("running_stats", nm, relerr(got[nm], v))
        else:
            note("param", nm, relerr(got[nm], v))
            # the update itself, which a plain param comparison would hide under |w|
            note("update", nm, update_err(before[nm], got[nm], v))
    ok = True
    for cat, (e, tname, lim, ea, es) in worst.items():
        bad = not (e < lim)
        ok &= not bad
        stxt = f", nudged input {es:.2e}" if esens else ""
        print(f"{'FAIL' if bad else 'ok  '} {label:28s} {cat:20s} worst rel err {e:.2e} "
              f"(torch fp32 {ea:.2e}{stxt}, limit {lim:.1e}) {tname}")

    # the state_dict the C side wrote loads into torchvision strictly and holds the updated values
    sd, _ = st_read(spath)
    fresh = make_model(name, k, c, seed + 99)
    try:
        fresh.load_state_dict({kk: torch.from_numpy(np.array(v)) for kk, v in sd.items()}, strict=True)
        e = max(relerr(fresh.state_dict()[kk].numpy(), got[kk]) for kk in sd if not kk.endswith("tracked"))
        nbt = int(fresh.bn1.num_batches_tracked)
        good = e == 0.0 and nbt == 7 + steps
        print(f"{'ok  ' if good else 'FAIL'} {label:28s} strict load_state_dict (max diff {e:.1e}, "
              f"num_batches_tracked {nbt})")
        ok &= good
    except Exception as ex:  # noqa: BLE001 -- report any load failure as a test failure
        print(f"FAIL {label}: strict load_state_dict: {ex}")
        ok = False
    return ok


def main():
    if not os.path.exists(DRIVER):
        print(f"FAIL: {DRIVER} not built")
        return 1
    fast = os.environ.get("DLJOB_TV_BACKEND", "cpu")
    cases = [
        ("resnet18-2x3x64-" + fast, "resnet18", (2, 3, 64, 64), 10, fast, {}),
        ("resnet18-3x3x40-ls-" + fast, "resnet18", (3, 3, 40, 40), 7, fast, {"label_smoothing": 0.1}),
        ("resnet50-2x3x64-" + fast, "resnet50", (2, 3, 64, 64), 10, fast, {}),
        ("resnet20-4x1x28-nest-" + fast, "resnet20", (4, 1, 28, 28), 10, fast,
         {"nesterov": True, "steps": 2, "decay_all": False}),
        ("resnet18-2x3x40-ref", "resnet18", (2, 3, 40, 40), 5, "ref", {}),
    ]
    ok = True
    with tempfile.TemporaryDirectory(prefix="dljob-tv-") as tmp:
        for i, (label, name, shape, k, backend, kw) in enumerate(cases):
            sens = {}
            # On the cpu backend: direct, the algorithm torch's CPU
            # convolutions run, then auto, what training runs (Winograd for
            # the 3x3 stride-1 layers: the engine's own kernels at 16 and 32
            # channels, oneDNN's from 64), then winograd, which also puts
            # every 3x3 stride-2 layer of 64-channel multiples on the
            # engine's stride-2 Winograd (auto does only on large batches
            # of 56x56 images), including a basic block's conv1, whose input
            # gradient adds into the shortcut's.
            algos = ("direct", "auto", "winograd") if name != "resnet20" else ("direct", "auto")
            for algo in algos if backend == "cpu" else (None,):
                ok &= run_case(tmp, label + ("-" + algo if algo else ""), name, shape, k, backend,
                               seed=10 * i, conv_algo=algo, sens=sens, **kw)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
