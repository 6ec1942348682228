"""The loader's decode memory is shared by its threads (--decode-memory,
dl_data_options.decode_memory), whatever their count.

A crafted image is small on disk and huge decoded: a 4000x4000 PNG of one
colour is 50 KB and takes ~200 MB to decode and resample at eval (48 MB of
pixels, 12 bytes a pixel of float rows for the resampler).  Eight of them
through eight loader threads: before, each thread held its own at once
(1.5 GB or more at the peak); now they share 256 MiB, so the process stays
under ~450 MB resident, and the epoch is the same (every sample loaded, the
same batches as with one thread).  A sample that needs more than the whole
budget (a 6000x6000 PNG under 256 MiB) is a bad sample whose message names
the file, what it needs and the budget; it is not an out-of-memory kill.

dljob pack's workers share one too (--decode-memory MIB): its eight
threads on the eight PNGs (decoded whole, then re-encoded as JPEG) held
~8 x 48 MB at once before (peak ~450 MB), now one at a time under 256 MiB;
the 6000x6000 PNG is left out with the same message.  Its prepared images
wait outside the budget until their block is written, so a block also ends
when they reach a quarter of it: 400 noise PNGs of 197 KB stored as they
are (--keep-png) under 16 MiB were all held in one block of 512 before (pack
peaked at 82 MB resident, 8 MB now; here the floor is this process's RSS at
the fork, ~37 MB)."""
import os, shutil, subprocess, sys, tempfile
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixtures import check, failures, tool


def peak_mb(args):
    """Run args, return (rc, stdout, stderr, its own peak RSS in MB)."""
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = p.stdout.read()
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, out, err, ru.ru_maxrss / 1024.0


def main():
    tmp = tempfile.mkdtemp(prefix="dljob-decmem-")
    # pack's prepared images count: a block ends at a quarter of the budget
    # (first: a child's peak RSS counts this process's at its fork)
    noise = os.path.join(tmp, "noise")
    for split in ["train", "val"]:
        os.makedirs(os.path.join(noise, split, "a"))
    for i in range(400):
        Image.frombytes("RGB", (256, 256), os.urandom(256 * 256 * 3)).save(
            os.path.join(noise, "train", "a", f"n{i:03d}.png"), compress_level=1)
    Image.new("RGB", (8, 8)).save(os.path.join(noise, "val", "a", "s.png"))
    total = sum(os.path.getsize(os.path.join(noise, "train", "a", f)) for f in os.listdir(os.path.join(noise, "train", "a")))
    check(total > 70e6, f"the noise PNGs are {total / 1e6:.0f} MB")
    rc, out, err, mb = peak_mb([tool("pack_tool"), noise, os.path.join(tmp, "npacked"), "--threads", "4",
                                "--keep-png", "--decode-memory", "16"])
    shutil.rmtree(noise)
    check(rc == 0 and "401 images in 1 shards" in err, f"pack of the noise PNGs: rc {rc} {err}")
    check(mb < 48, f"pack: 400 noise PNGs ({total / 1e6:.0f} MB) kept as they are under a 16 MiB budget "
          f"peaked at {mb:.0f} MB")
    print(f"pack, 4 threads, 400 noise PNGs kept as they are, 16 MiB budget: peak {mb:.0f} MB resident")

    root = os.path.join(tmp, "big")
    for split in ["train", "val"]:
        os.makedirs(os.path.join(root, split, "a"))
    Image.new("RGB", (32, 32), (1, 2, 3)).save(os.path.join(root, "train", "a", "small.png"))
    big = Image.new("RGB", (4000, 4000), (10, 200, 30))
    for i in range(8):
        big.save(os.path.join(root, "val", "a", f"big{i}.png"), compress_level=9)
    del big  # a child's peak RSS counts the parent's at its fork
    size = os.path.getsize(os.path.join(root, "val", "a", "big0.png"))
    check(size < 200000, f"the crafted PNG is {size} bytes on disk")

    def run(threads, budget, max_bad="0.01"):
        return peak_mb([tool("dataset_tool"), "epoch", root, "224", "eval", "8", str(threads), max_bad, str(budget)])

    rc, out, err, mb = run(8, 256)
    check(rc == 0 and out.startswith("samples 8 bad 0 "), f"8 threads under 256 MiB: rc {rc} {out} {err}")
    check(mb < 450, f"8 threads decoding 8 4000x4000 PNGs under a 256 MiB budget peaked at {mb:.0f} MB")
    print(f"8 threads, 256 MiB budget: peak {mb:.0f} MB resident")
    rc1, out1, err1, mb1 = run(1, 256)
    check(rc1 == 0 and out1.split()[-1] == out.split()[-1], f"1 thread: other batches: {out1} vs {out} {err1}")
    print(f"1 thread: peak {mb1:.0f} MB resident")

    # more than the whole budget: a bad sample naming the file and the sizes
    Image.new("RGB", (6000, 6000), (10, 200, 30)).save(os.path.join(root, "val", "a", "huge.png"), compress_level=9)
    rc, out, err, mb = run(4, 256, "0.5")
    check(rc == 0 and out.startswith("samples 9 bad 1 "), f"a sample over the budget: rc {rc} {out} {err}")
    check("/val/a/huge.png: needs " in err and "MiB to read and decode" in err and
          "more than the 256 MiB of decode memory the threads share (--decode-memory)" in err,
          f"the message: {err}")
    check(mb < 450, f"the refused sample was decoded anyway: peak {mb:.0f} MB")

    # dljob pack: its workers share the budget
    packed = os.path.join(tmp, "packed")
    rc, out, err, mb = peak_mb([tool("pack_tool"), root, packed, "--threads", "8", "--decode-memory", "256"])
    check(rc == 0 and "skipping val/a/huge.png: val/a/huge.png: needs " in err and
          "more than the 256 MiB of decode memory the threads share (--decode-memory)" in err and
          "9 images in 1 shards" in err, f"pack under 256 MiB: rc {rc} {err}")
    check(mb < 250, f"pack: 8 threads on 8 4000x4000 PNGs under a 256 MiB budget peaked at {mb:.0f} MB")
    print(f"pack, 8 threads, 256 MiB budget: peak {mb:.0f} MB resident")
    p = subprocess.run([tool("pack_tool"), root, packed, "--decode-memory", "8"], capture_output=True, text=True)
    check(p.returncode == 2 and "decode-memory" in p.stderr, f"pack --decode-memory 8: {p.returncode} {p.stderr}")

    # the option of dljob (train and eval): --decode-memory MIB
    dljob = os.environ.get("DLJOB_BIN")
    if dljob:
        shutil.copy(os.path.join(root, "val", "a", "big0.png"), os.path.join(root, "train", "a", "big0.png"))
        p = subprocess.run([dljob, "--model", "resnet20", "--data", root, "--image-size", "32", "--batch", "1",
                            "--steps", "1", "--eval", "0", "--threads", "1", "--loader-threads", "2",
                            "--decode-memory", "64", "--out", os.path.join(tmp, "out")],
                           capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
        check("/train/a/big0.png: needs " in p.stderr and "more than the 64 MiB of decode memory" in p.stderr,
              f"dljob --decode-memory 64: {p.returncode} {p.stderr}")
        p = subprocess.run([dljob, "--model", "resnet20", "--data", root, "--decode-memory", "8"],
                           capture_output=True, text=True)
        check(p.returncode == 2 and "decode-memory" in p.stderr, f"--decode-memory 8: {p.returncode} {p.stderr}")
        p = subprocess.run([dljob, "eval", "--help"], capture_output=True, text=True)
        check("--decode-memory MIB" in p.stdout + p.stderr, "dljob eval --help has no --decode-memory")
    shutil.rmtree(tmp)
    if failures:
        print(f"test_decode_memory: {len(failures)} checks failed", file=sys.stderr)
        return 1
    print("test_decode_memory: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
