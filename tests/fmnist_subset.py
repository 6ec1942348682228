#!/usr/bin/env python3
"""fmnist_subset.py SRC DST NTRAIN NTEST: the first NTRAIN/NTEST samples of
the Fashion-MNIST IDX files in SRC (as Debian's dataset-fashion-mnist ships
them, .gz) as plain IDX files in DST, for training runs that must take
seconds (an epoch of 4096 samples is a few dozen steps)."""
import gzip
import os
import struct
import sys

src, dst, ntr, nte = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
os.makedirs(dst, exist_ok=True)
for split, n in (("train", ntr), ("t10k", nte)):
    for kind, hdr, item in (("images-idx3", 16, 784), ("labels-idx1", 8, 1)):
        with gzip.open(f"{src}/{split}-{kind}-ubyte.gz") as f:
            raw = f.read()
        assert struct.unpack(">I", raw[4:8])[0] >= n, (split, kind, n)
        head = bytearray(raw[:hdr])
        head[4:8] = struct.pack(">I", n)
        with open(f"{dst}/{split}-{kind}-ubyte", "wb") as f:
            f.write(bytes(head) + raw[hdr:hdr + n * item])
