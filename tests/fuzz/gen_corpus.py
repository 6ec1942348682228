"""Write the named seeds of tests/fuzz/corpus/ (run by hand with /usr/bin/python3
from the source tree when a format changes; the files are committed).  Each
seed is a valid or almost valid input in the layout the target's header
comment describes.  The files named by a SHA-1 beside them are inputs that
found new coverage in longer runs, merged in with
  tests/fuzz/fuzz_X -merge=1 ../../tests/fuzz/corpus/fuzz_X fuzz-work/fuzz_X
(from _build/_asan); keep them small."""
import gzip, io, os, struct, zlib
from PIL import Image

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    d = os.path.join(HERE, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def png_2x2():
    """The 75-byte PNG that fuzz_shards.c holds as an array."""
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    raw = b"".join(b"\x00" + bytes([10, 200, 30, 250, 20, 90]) for _ in range(2))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def idx():
    images = struct.pack(">IIII", 2051, 2, 3, 3) + bytes(range(18))
    labels = struct.pack(">II", 2049, 2) + bytes([1, 9])
    put("fuzz_idx", "train-images", b"\x00" + images)
    put("fuzz_idx", "train-labels", b"\x01" + labels)
    put("fuzz_idx", "t10k-images-gz", b"\x02" + gzip.compress(images, mtime=0))
    put("fuzz_idx", "t10k-labels-bad", b"\x03" + struct.pack(">II", 2049, 1) + b"\x0a")
    put("fuzz_idx", "huge-dims", b"\x00" + struct.pack(">IIII", 2051, 1 << 28, 4096, 4096) + bytes(16))


def u(v, n):
    return v.to_bytes(n, "little")


def shards():
    n = len(png_2x2())
    def rec(shard, label, off, size, name):
        return u(shard, 4) + u(label, 4) + u(off, 8) + u(size, 4) + b"\x02\x00" + u(len(name), 2) + name
    def index(train, val, nsh=2, classes=(b"a", b"b")):
        b = b"DLJOBSH1" + u(1, 8) + u(nsh, 8) + u(len(classes), 8)
        for c in classes:
            b += u(len(c), 8) + c
        for recs in (train, val):
            b += u(len(recs), 8) + b"".join(recs)
        return b
    put("fuzz_shards", "valid", index([rec(0, 0, 0, n, b"a/x.png"), rec(1, 1, n, n, b"b/y.png")],
                                      [rec(0, 1, n, n, b"b/z.png")]))
    put("fuzz_shards", "past-end", index([rec(0, 0, n, (4 << 30) - 1, b"a/x.png")], []))
    put("fuzz_shards", "bad-shard", index([rec(5, 0, 0, n, b"a/x.png")], [], nsh=1))


def imagefolder():
    def s(b):
        return u(len(b), 8) + b
    def cache(classes, train, val):
        # one class: the harness inserts the tree's stamps after nclass
        b = u(len(classes), 8) + (b"" if len(classes) == 1 else bytes(48 * (len(classes) + 1)))
        for c in classes:
            b += s(c)
        for recs in (train, val):
            b += u(len(recs), 8) + b"".join(u(c, 8) + s(n) for c, n in recs)
        return b
    put("fuzz_imagefolder", "valid", cache([b"a"], [(0, b"x.jpg")], [(0, b"x.jpg")]))
    put("fuzz_imagefolder", "dotdot-name", cache([b"a"], [(0, b"../a/x.jpg")], [(0, b"x.jpg")]))
    put("fuzz_imagefolder", "dotdot-class", cache([b".."], [(0, b"a/x.jpg")], [(0, b"x.jpg")]))
    put("fuzz_imagefolder", "empty-name", cache([b"a"], [(0, b"")], []))
    put("fuzz_imagefolder", "long-name", cache([b"a"], [(0, b"x" * 300 + b".jpg")], [(0, b"x.jpg")]))


def image():
    im = Image.new("RGB", (13, 7))
    im.putdata([((x * 19) % 256, (y * 37) % 256, (x * y * 5) % 256) for y in range(7) for x in range(13)])
    for name, kw in [("baseline.jpg", dict(format="JPEG", quality=80)),
                     ("progressive.jpg", dict(format="JPEG", quality=60, progressive=True)),
                     ("rgb.png", dict(format="PNG"))]:
        b = io.BytesIO()
        im.save(b, **kw)
        put("fuzz_image", name, b.getvalue())
    for mode, name in [("L", "gray.png"), ("P", "palette.png"), ("RGBA", "alpha.png"), ("CMYK", "cmyk.jpg")]:
        b = io.BytesIO()
        im.convert(mode).save(b, format="JPEG" if name.endswith(".jpg") else "PNG")
        put("fuzz_image", name, b.getvalue())
    put("fuzz_image", "png-2x2.png", png_2x2())
    # over the scan limit: the progressive file's first scan (DC) 500 more times
    b = io.BytesIO()
    im.save(b, format="JPEG", quality=60, progressive=True)
    d = b.getvalue()
    sos = d.index(b"\xff\xda")
    end = d.index(b"\xff\xda", sos + 2)  # to the next scan, with the Huffman table before it
    put("fuzz_image", "progressive-scans.jpg", d[:end] + d[sos:end] * 500 + d[end:])
    # ancillary chunks that are skipped unread (zTXt, iCCP, tEXt)
    def chunk(t, data):
        return struct.pack(">I", len(data)) + t + data + struct.pack(">I", zlib.crc32(t + data))
    p = png_2x2()
    put("fuzz_image", "text-chunks.png", p[:33] + chunk(b"zTXt", b"k\0\0" + zlib.compress(bytes(4096)))
        + chunk(b"iCCP", b"p\0\0" + zlib.compress(bytes(128))) + chunk(b"tEXt", b"k\0v") + p[33:])


def safetensors(tensors, meta):
    """tensors: [(name, dtype, shape, bytes)]"""
    h, data = {}, b""
    if meta is not None:
        h["__metadata__"] = meta
    for name, dt, shape, b in tensors:
        h[name] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    import json
    hb = json.dumps(h, separators=(",", ":")).encode()
    hb += b" " * (-len(hb) % 8)
    return u(len(hb), 8) + hb + data


def checkpoint():
    f32 = lambda n: struct.pack("<%df" % n, *[i * 0.5 for i in range(n)])
    meta = {"format": "dljob-checkpoint-1", "model": "tiny", "step": "12", "epoch": "2", "epoch_step": "3",
            "seed": "42", "wall_s": "1.500", "global_batch": "32", "epochs": "4"}
    tensors = [("w", "F32", [2, 3], f32(6)), ("bn.running_mean", "F32", [3], f32(3)),
               ("bn.num_batches_tracked", "I64", [], u(7, 8))]
    put("fuzz_checkpoint", "valid", safetensors(tensors, meta))
    put("fuzz_checkpoint", "f64", safetensors([("w", "F64", [2, 3], bytes(48)),
                                               ("bn.running_mean", "F64", [3], bytes(24))], meta))
    put("fuzz_checkpoint", "big-epoch", safetensors(tensors, dict(meta, epoch="2147483648")))
    # the data's fingerprints (keys added later: optional)
    put("fuzz_checkpoint", "valid-data", safetensors(tensors, dict(meta, data_classes="0123456789abcdef",
                                                                    data_samples="fedcba9876543210")))
    # the keys added to format 1 later (optional), and another format version
    full = dict(meta, ranks="4", batch="8", num_classes="7", train_samples="1000", eval_samples="40",
                lr="0.10000000000000001", warmup_epochs="0.5", schedule="cosine", precision="bf16", backend="cpu")
    put("fuzz_checkpoint", "valid-full", safetensors(tensors, full))
    # fp16 on cuda: the loss scale and its clean steps (optional, together)
    put("fuzz_checkpoint", "valid-fp16", safetensors(tensors, dict(full, precision="fp16", backend="cuda",
                                                                    loss_scale="2048", loss_scale_good="1999")))
    put("fuzz_checkpoint", "format-2", safetensors(tensors, dict(meta, format="dljob-checkpoint-2")))
    put("fuzz_checkpoint", "shape-overflow", safetensors([("w", "F32", [4611686018427387904, 1], b"")], None))
    hb = b'{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1'
    put("fuzz_checkpoint", "digits-at-eof", u(len(hb), 8) + hb)
    # --init weights (dl_weights_init): torchvision's state_dict layout with a
    # classifier, in F32 and in half types, and a wrong class count
    init = [("w", "F32", [2, 3], f32(6)), ("fc.weight", "F32", [2, 3], f32(6)), ("fc.bias", "F32", [2], f32(2)),
            ("bn.running_mean", "F32", [3], f32(3)), ("bn.num_batches_tracked", "I64", [], u(7, 8))]
    put("fuzz_checkpoint", "init-torchvision", safetensors(init, None))
    put("fuzz_checkpoint", "init-half", safetensors([("w", "F16", [2, 3], bytes(12)), ("fc.weight", "BF16", [2, 3], bytes(12)),
                                                     ("fc.bias", "F64", [2], bytes(16)),
                                                     ("bn.running_mean", "F32", [3], f32(3))], {"format": "pt"}))
    put("fuzz_checkpoint", "init-head5", safetensors([("w", "F32", [2, 3], f32(6)), ("fc.weight", "F32", [5, 3], f32(15)),
                                                      ("fc.bias", "F32", [5], f32(5)), ("x", "F32", [1], f32(1))],
                                                     {"format": "pt", "model": "tiny"}))


def mca():
    # Open MPI parameter files (dl_mca_file_names): a site file, the keys
    # dljob looks for in Open MPI's spellings, a comment and near misses
    put("fuzz_mca", "site", b"# site\nbtl_base_warn_component_unused=0\nbtl = ^uct,openib,ofi\npml = ^ucx\n")
    put("fuzz_mca", "include", b"btl_tcp_if_include = eth0\n")
    put("fuzz_mca", "exclude", b"  # btl_tcp_if_include = eth0\n\tbtl_tcp_if_exclude=docker0\r\n")
    put("fuzz_mca", "near", b"btl_tcp_if_include_x = 1\nbtl_tcp_if_includ=2\n")
    put("fuzz_mca", "mpirun-forms", b"--mca btl_tcp_if_include eth0\n-x A=b -x C\n-mca a 'b c' --mca d \"e\" \n")
    put("fuzz_mca", "comments", b"/* a\n**/ btl_tcp_if_include = x\n// y\n@b=\f1\n# z")


idx()
shards()
imagefolder()
image()
checkpoint()
mca()
