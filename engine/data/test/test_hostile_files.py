"""Files placed by someone else never hang the loader, redirect it, or make
it allocate what the file does not hold (issue 19, finding 12).

  fifo.jpg in an ImageFolder class dir   reported as a bad sample ("not a
                                         regular file"), never opened, not even
                                         without blocking (a writer waiting on
                                         it stays blocked: opening a device
                                         node can rewind a tape or raise a line)
  a bad image named "evil\n dljob: ..."  logged on one line ('?' for the newline)
  a FIFO as a shard file or IDX file     the open fails at once, naming it
  an ImageFolder index cache naming      ignored (the tree is scanned again):
    "../secret.jpg", class "..", ...     no sample outside DIR/<split>/<class>;
    or listing a file twice, unsorted    nor twice, nor out of order
  a shard index record past its shard    refused at open, naming the record
  a shard record of 300 MiB              a bad sample, never read (256 MiB at
                                         most, as an ImageFolder file)
  a symlink at dljob pack's temp name    not followed (the target is untouched)
  an IDX header announcing 13 GB         refused after reading what is there;
                                         the gzip'd one runs under a 1 GiB
                                         address-space limit (not under ASan)
  a progressive JPEG with 1000 scans     a bad sample ("more than 500 scans"):
                                         each scan walks the whole image
  a PNG with 1000 zTXt chunks that each  decoded (text is never inflated;
    inflate to 7.9 MB (7.7 MB file)      it took libpng 60 s before)
  1x1 JPEG and PNG                       decoded
Paths near PATH_MAX: DIR/train/abc is 4095 bytes, so DIR/train/abcdef does
not fit in a path; its listing must not be abc's (it was: the truncated
path named abc): the open fails, naming the class dir first.
Files that change between the open (index built) and the reads, as on a
shared file system under a running job: an image deleted, cut short or
replaced, a class dir removed, a shard cut short -- each a bad sample
naming the file and why, the replaced one read as it is now with its
directory's label.
Every run has a 30 s timeout: a hang is a failure, not a stuck test."""
import gzip, io, os, resource, shutil, struct, subprocess, sys, tempfile, threading, zlib
import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixtures import check, failures, tool

ASAN = "ASAN_OPTIONS" in os.environ  # make check-asan: no address-space limit


def dump(spec, tmp, cache=None, limit_as=None):
    """dataset_tool dump SPEC 32 train; (rc, stdout, stderr), rc None on timeout."""
    cmd = [tool("dataset_tool"), "dump", spec, "32", "train", os.path.join(tmp, "out.f32")] + ([cache] if cache else [])
    pre = None
    if limit_as and not ASAN:
        pre = lambda: resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=30, preexec_fn=pre)
    except subprocess.TimeoutExpired:
        return None, "", "timed out after 30 s"
    return p.returncode, p.stdout, p.stderr.strip()


def jpeg(color):
    b = io.BytesIO()
    Image.new("RGB", (40, 30), color).save(b, format="JPEG")
    return b.getvalue()


def u(v, n):
    return v.to_bytes(n, "little")


def imagefolder(tmp):
    root = os.path.join(tmp, "if")
    for split in ("train", "val"):
        os.makedirs(os.path.join(root, split, "a"))
        with open(os.path.join(root, split, "a", "x.jpg"), "wb") as f:
            f.write(jpeg((200, 10, 10)))
    fifo = os.path.join(root, "train", "a", "fifo.jpg")
    os.mkfifo(fifo)
    opened = []  # a writer's open returns once anyone opens the FIFO to read
    writer = threading.Thread(target=lambda: opened.append(os.open(fifo, os.O_WRONLY)))
    writer.start()
    rc, out, err = dump(root, tmp)
    check(rc == 0, f"imagefolder with a FIFO: rc {rc}: {err}")
    bad = [l for l in out.splitlines() if l.startswith("bad ")]
    check(len(bad) == 1 and "/train/a/fifo.jpg: not a regular file" in bad[0], f"FIFO sample: {bad}")
    check(not opened, "the FIFO named like an image was opened")
    release = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    writer.join()
    os.close(opened[0])
    os.close(release)
    os.unlink(os.path.join(root, "train", "a", "fifo.jpg"))

    # a bad image whose name holds a newline is logged on one line
    evil = os.path.join(root, "train", "a", "evil\ndljob: forged.jpg")
    with open(evil, "w") as f:
        f.write("not an image\n")
    try:
        p = subprocess.run([tool("dataset_tool"), "epoch", root, "32", "train", "2", "1", "0.9"],
                           capture_output=True, text=True, timeout=30)
        lines = p.stderr.splitlines()
        check(p.returncode == 0 and any("/train/a/evil?dljob: forged.jpg: " in l for l in lines)
              and not any(l.startswith("dljob: forged") for l in lines), f"newline in a file name: {p.stderr!r}")
    except subprocess.TimeoutExpired:
        check(False, "newline in a file name: timed out")
    os.unlink(evil)

    # index caches naming files outside the tree: root/secret.jpg is a text
    # file, so a sample read from there shows as a bad sample
    with open(os.path.join(root, "secret.jpg"), "w") as f:
        f.write("not for the loader\n")
    real = os.path.realpath(root)
    h = 1469598103934665603
    for c in real.encode():
        h = ((h ^ c) * 1099511628211) % (1 << 64)
    cache = os.path.join(tmp, "cache")
    os.makedirs(cache)
    cfile = os.path.join(cache, "imagefolder-%016x.idx" % h)
    def stamp(*p):
        st = os.stat(os.path.join(root, *p))
        return u(st.st_mtime_ns, 8) + u(st.st_ctime_ns, 8) + u(st.st_ino, 8)
    s = lambda b: u(len(b), 8) + b

    def write_cache(cls, names):
        # the stamps of DIR/{train,val}/CLS as they are: the cache matches the tree
        b = b"DLJOBIF2" + s(real.encode()) + u(1, 8) + stamp("train") + stamp("val")
        b += stamp("train", cls.decode()) + stamp("val", cls.decode()) + s(cls)
        for split_names in names:
            b += u(len(split_names), 8) + b"".join(u(0, 8) + s(n) for n in split_names)
        with open(cfile, "wb") as f:
            f.write(b)

    # a well-formed cache is used (a file only it names shows up) ...
    write_cache(b"a", [[b"x.jpg", b"y.jpg"], [b"x.jpg"]])
    rc, out, err = dump(root, tmp, cache)
    check(rc == 0 and out.startswith("classes 1 count 2"), f"valid cache not used: {rc} {out[:40]} {err}")
    # ... and hostile ones are not
    for what, cls, name in [("../ in a file name", b"a", b"../../secret.jpg"),
                            ("class ..", b"..", b"secret.jpg"),
                            ("/ in a file name", b"a", b"/" + root.encode() + b"/secret.jpg"),
                            ("a newline", b"a", b"x.jpg\nbad 0 forged"),
                            ("an empty name", b"a", b""),
                            ("a file listed twice", b"a", [b"x.jpg", b"x.jpg"]),
                            ("files out of order", b"a", [b"y.jpg", b"x.jpg"])]:
        write_cache(cls, [name if isinstance(name, list) else [name], [b"x.jpg"]])
        rc, out, err = dump(root, tmp, cache)
        check(rc == 0 and out.splitlines() == ["classes 1 count 1", "label 0"],
              f"cache with {what}: rc {rc} {out!r} {err}")


def pack_symlink(tmp):
    """A symlink planted at dljob pack's temp file name does not redirect the write."""
    root = os.path.join(tmp, "pk")
    for split in ("train", "val"):
        os.makedirs(os.path.join(root, split, "a"))
        with open(os.path.join(root, split, "a", "x.jpg"), "wb") as f:
            f.write(jpeg((10, 10, 200)))
    dst = os.path.join(tmp, "pk-out")
    os.makedirs(dst)
    victim = os.path.join(tmp, "victim.txt")
    with open(victim, "w") as f:
        f.write("precious\n")
    os.symlink(victim, os.path.join(dst, ".shard-00000.bin.tmp"))
    p = subprocess.run([tool("pack_tool"), root, dst], capture_output=True, text=True, timeout=60)
    check(open(victim, "rb").read() == b"precious\n", "dljob pack wrote through a planted symlink")
    check(p.returncode != 0 and ".shard-00000.bin.tmp: Too many levels of symbolic links" in p.stderr,
          f"pack with a planted symlink: rc {p.returncode}: {p.stderr}")


def shards(tmp):
    d = os.path.join(tmp, "shards")
    os.makedirs(d)
    img = jpeg((10, 200, 10))
    with open(os.path.join(d, "shard-00000.bin"), "wb") as f:
        f.write(img)

    def index(size):
        rec = u(0, 4) + u(0, 4) + u(0, 8) + u(size, 4) + b"\x01\x00" + u(5, 2) + b"a/x.j"
        b = b"DLJOBSH1" + u(1, 8) + u(1, 8) + u(1, 8) + u(1, 8) + b"a"
        b += u(1, 8) + rec + u(0, 8)
        with open(os.path.join(d, "dljob-shards.idx"), "wb") as f:
            f.write(b)

    index(len(img))
    rc, out, err = dump(d, tmp)
    check(rc == 0 and "label 0" in out, f"valid shards: {rc} {out} {err}")
    index(0xFFFFFFFF)
    rc, out, err = dump(d, tmp)
    check(rc == 2 and "train sample 0 is 4294967295 bytes at offset 0, past the end of shard-00000.bin" in err,
          f"record past the shard: rc {rc}: {out} {err}")
    # a record bigger than any image (256 MiB), inside its (sparse) shard:
    # a bad sample before anything is read, as an ImageFolder file that big
    big = 300 << 20
    os.truncate(os.path.join(d, "shard-00000.bin"), big)
    index(big)
    rc, out, err = dump(d, tmp)
    check(rc == 0 and f"bad 0 {d}/shard-00000.bin@0 (a/x.j): {big} bytes, more than the 268435456 an image may have"
          in out, f"record of 300 MiB: rc {rc}: {out} {err}")
    index(len(img))
    os.unlink(os.path.join(d, "shard-00000.bin"))
    os.mkfifo(os.path.join(d, "shard-00000.bin"))
    rc, out, err = dump(d, tmp)
    check(rc == 2 and err.endswith("shard-00000.bin: not a regular file"), f"FIFO shard: rc {rc}: {err}")


def idx(tmp):
    d = os.path.join(tmp, "fm")
    os.makedirs(d)
    images = struct.pack(">IIII", 2051, 1, 28, 28) + bytes(784)
    labels = struct.pack(">II", 2049, 1) + b"\x03"
    for p in ("train", "t10k"):
        with open(os.path.join(d, f"{p}-images-idx3-ubyte"), "wb") as f:
            f.write(images)
        with open(os.path.join(d, f"{p}-labels-idx1-ubyte"), "wb") as f:
            f.write(labels)
    rc, out, err = dump("fashion-mnist:" + d, tmp)
    check(rc == 0 and "label 3" in out, f"valid IDX: {rc} {out} {err}")
    path = os.path.join(d, "train-images-idx3-ubyte")
    # 200000 x 256 x 256 = 13 GB announced by a 300-byte file
    big = struct.pack(">IIII", 2051, 200000, 256, 256) + bytes(284)
    with open(path, "wb") as f:
        f.write(big)
    rc, out, err = dump("fashion-mnist:" + d, tmp, limit_as=1 << 30)
    check(rc == 2 and err == f"{path}: truncated: the IDX header announces 13107200000 bytes of images, the file holds 284",
          f"IDX announcing 13 GB: rc {rc}: {err}")
    os.unlink(path)
    with open(path + ".gz", "wb") as f:
        f.write(gzip.compress(big, mtime=0))
    rc, out, err = dump("fashion-mnist:" + d, tmp, limit_as=1 << 30)
    check(rc == 2 and err == f"{path}.gz: truncated: the images the header announces needs 13107200000 bytes, file ends after 284",
          f"gzip'd IDX announcing 13 GB: rc {rc}: {err}")
    os.unlink(path + ".gz")
    os.mkfifo(path)
    rc, out, err = dump("fashion-mnist:" + d, tmp)
    check(rc == 2 and err == f"{path}: not a regular file", f"FIFO IDX: rc {rc}: {err}")


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def many_scans(extra, side=1024):
    """A progressive JPEG with its shortest scan repeated `extra` more times
    (libjpeg only warns about the bogus progression and decodes every one)."""
    b = io.BytesIO()
    Image.linear_gradient("L").resize((side, side)).convert("RGB").save(b, "JPEG", progressive=True)
    d, i, scans = b.getvalue(), 2, []
    while d[i + 1] != 0xD9:
        end = i + 2 + ((d[i + 2] << 8) | d[i + 3])
        if d[i + 1] == 0xDA:  # SOS: the entropy-coded data runs to the next marker
            while d[end] != 0xFF or d[end + 1] == 0 or 0xD0 <= d[end + 1] <= 0xD7:
                end += 1
            scans.append((i, end))
        i = end
    a, e = min(scans, key=lambda s: s[1] - s[0])
    return d[:e] + d[a:e] * extra + d[e:]


def bombs(tmp):
    root = os.path.join(tmp, "bombs")
    cls = os.path.join(root, "train", "a")
    os.makedirs(cls)
    with open(os.path.join(cls, "scans.jpg"), "wb") as f:
        f.write(many_scans(1000))
    b = io.BytesIO()
    Image.new("RGB", (8, 8), (10, 200, 30)).save(b, "PNG")
    p = b.getvalue()
    ztxt = png_chunk(b"zTXt", b"k\0\0" + zlib.compress(b"\0" * 7_900_000, 9))
    with open(os.path.join(cls, "ztxt.png"), "wb") as f:
        f.write(p[:33] + ztxt * 1000 + p[33:])  # after the signature and IHDR
    for fmt in ("JPEG", "PNG"):
        Image.new("RGB", (1, 1), (1, 2, 3)).save(os.path.join(cls, f"tiny.{fmt.lower()}"), fmt)
    rc, out, err = dump(root, tmp, limit_as=1 << 30)
    lines = out.splitlines()
    check(rc == 0 and len(lines) == 5, f"bombs: rc {rc}: {out!r} {err}")
    if rc == 0 and len(lines) == 5:
        # samples in name order: scans.jpg tiny.jpeg tiny.png ztxt.png
        check(lines[1].startswith("bad 0 ") and "scans.jpg: corrupt JPEG: more than 500 scans" in lines[1],
              f"1000-scan JPEG: {lines[1]}")
        check(lines[2:] == ["label 0"] * 3, f"1x1 JPEG, 1x1 PNG, zTXt PNG: {lines[2:]}")


def long_paths(tmp):
    root = os.path.join(os.path.realpath(tmp), "long")
    while len(root) + len("/train/abc") < 4095 - 200:
        root = os.path.join(root, "d" * 199)
    root = os.path.join(root, "e" * (4095 - len(root) - len("/train/abc") - 1))
    assert len(root + "/train/abc") == 4095
    os.makedirs(os.path.join(root, "train", "abc"))
    fd = os.open(os.path.join(root, "train"), os.O_RDONLY | os.O_DIRECTORY)
    try:  # the images' paths are too long: made relative to DIR/train
        os.mkdir("abcdef", dir_fd=fd)
        for name in ("abc/x.jpg", "abcdef/y.jpg"):
            with open(os.open(name, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "wb") as f:
                f.write(jpeg((10, 200, 10)))
    finally:
        os.close(fd)
    rc, out, err = dump(root, tmp)
    check(rc == 2 and err.startswith(f"train/abcdef: path longer than PATH_MAX (in {root[:200]}"),
          f"class dir past PATH_MAX: rc {rc}: {out[:300]!r} {err[:300]}")


def dump_later(spec, tmp, change):
    """dataset_tool dump-later: change() runs between the open and the reads."""
    p = subprocess.Popen([tool("dataset_tool"), "dump-later", spec, "32", "train", os.path.join(tmp, "out.f32")],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        head = p.stdout.readline()
        change()
        out, err = p.communicate("go\n", timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        return None, [], "timed out after 30 s"
    return p.returncode, [head.strip()] + out.splitlines(), err.strip()


def changing(tmp):
    root = os.path.join(tmp, "changing")
    noise = Image.effect_noise((64, 64), 60).convert("RGB")
    for split in ("train", "val"):
        for cls in ("a", "b"):
            os.makedirs(os.path.join(root, split, cls))
    a, b = os.path.join(root, "train", "a"), os.path.join(root, "train", "b")
    for name in ("cut.jpg", "gone.jpg", "ok.jpg", "swapped.jpg"):
        noise.save(os.path.join(a, name), "JPEG")
    noise.save(os.path.join(a, "cut.png"), "PNG")
    for name in ("x.jpg", "y.jpg"):
        noise.save(os.path.join(b, name), "JPEG")
        noise.save(os.path.join(root, "val", "a" if name == "x.jpg" else "b", name), "JPEG")

    def change():
        os.unlink(os.path.join(a, "gone.jpg"))
        for name in ("cut.jpg", "cut.png"):
            path = os.path.join(a, name)
            os.truncate(path, os.path.getsize(path) // 2)
        Image.new("RGB", (40, 30), (0, 0, 255)).save(os.path.join(a, "new.png"), "PNG")
        os.rename(os.path.join(a, "new.png"), os.path.join(a, "swapped.jpg"))
        shutil.rmtree(b)

    rc, lines, err = dump_later(root, tmp, change)
    want = ["classes 2 count 7",
            f"bad 0 {a}/cut.jpg: truncated JPEG (no end-of-image marker)",
            f"bad 1 {a}/cut.png: corrupt PNG: truncated PNG (read past the end of the file)",
            f"bad 2 {a}/gone.jpg: No such file or directory",
            "label 0", "label 0",
            f"bad 5 {b}/x.jpg: No such file or directory",
            f"bad 6 {b}/y.jpg: No such file or directory"]
    check(rc == 0 and lines == want, f"files changed under the open ImageFolder: rc {rc}: {lines} {err}")
    if rc == 0 and len(lines) == 8:
        x = np.fromfile(os.path.join(tmp, "out.f32"), np.float32).reshape(7, 3, 32, 32)
        check(x[4, 2].mean() > 2 and x[4, 0].mean() < -1, "the replaced image was not read as it is now (blue)")

    # packed shards: the shard file cut short after the index was read
    src, packed = os.path.join(tmp, "changing-src"), os.path.join(tmp, "changing-packed")
    os.makedirs(os.path.join(src, "train", "a"))
    for name in ("x.jpg", "y.jpg"):
        noise.save(os.path.join(src, "train", "a", name), "JPEG")
    p = subprocess.run([tool("pack_tool"), src, packed], capture_output=True, text=True, timeout=60)
    check(p.returncode == 0, f"pack: {p.stderr}")
    shard = os.path.join(packed, "shard-00000.bin")
    rc, lines, err = dump_later(packed, tmp, lambda: os.truncate(shard, 0))
    check(rc == 0 and len(lines) > 1 and all(l.startswith("bad ") and "shard file shorter than its index says" in l
                                             for l in lines[1:]),
          f"shard cut short under the open dataset: rc {rc}: {lines} {err}")


def main():
    tmp = tempfile.mkdtemp(prefix="dljob-hostile-")
    try:
        changing(tmp)
        long_paths(tmp)
        bombs(tmp)
        imagefolder(tmp)
        pack_symlink(tmp)
        shards(tmp)
        idx(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print(f"test_hostile_files: {len(failures)} checks failed", file=sys.stderr)
        return 1
    print("test_hostile_files: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
