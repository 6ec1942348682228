"""Bad inputs never stop training; bad trees stop before the first step.

Fixtures built here (Fashion-MNIST images from Debian's dataset-fashion-mnist
written as JPEG; china.jpg / chelsea.png from python3-sklearn / -skimage cut
short):
  corrupt.jpg     SOI then garbage where the headers should be
  trunc.jpg       the first half of china.jpg
  trunc.png       the first half of chelsea.png
  empty.jpg       zero bytes
  text.jpg        a text file named .jpg
  dir.jpg/        a directory named like an image
  huge.jpg        a valid JPEG whose SOF header claims 40000x40000 pixels
  noperm.jpg      mode 000, read as user nobody (setpriv) when the tests run as root
Each must be replaced, logged once with its path and reason, and counted by
the loader; with a lower max_bad_fraction the loader must stop with a clear
error.  Tree errors: missing train/, no classes, an empty class dir, val
classes differing from train -- each one clear line."""
import os, shutil, subprocess, sys, tempfile
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixtures import check, failures, fmnist_images, tool, SKLEARN, SKIMAGE


def patch_sof(data, w, h):
    """Set the dimensions in the first SOFn segment of a JPEG."""
    b = bytearray(data)
    i = 2
    while i < len(b):
        marker = b[i + 1]
        seglen = (b[i + 2] << 8) | b[i + 3]
        if marker in (0xC0, 0xC1, 0xC2):
            b[i + 5:i + 7] = h.to_bytes(2, "big")
            b[i + 7:i + 9] = w.to_bytes(2, "big")
            return bytes(b)
        i += 2 + seglen
    raise RuntimeError("no SOF")


def main():
    tmp = tempfile.mkdtemp(prefix="dljob-bad-")
    os.chmod(tmp, 0o755)
    root = os.path.join(tmp, "bad")
    cls = os.path.join(root, "train", "shirts")
    os.makedirs(cls)
    os.makedirs(os.path.join(root, "val", "shirts"))
    imgs, _ = fmnist_images(72)
    for i in range(72):
        Image.fromarray(imgs[i]).save(os.path.join(cls if i < 64 else os.path.join(root, "val", "shirts"), f"ok{i:02d}.jpg"))
    china = open(f"{SKLEARN}/china.jpg", "rb").read()
    chelsea = open(f"{SKIMAGE}/chelsea.png", "rb").read()
    good = open(os.path.join(cls, "ok00.jpg"), "rb").read()
    files = {
        "corrupt.jpg": b"\xff\xd8\xff" + bytes((i * 37 + 11) % 256 for i in range(3000)) + b"\xff\xd9",
        "trunc.jpg": china[: len(china) // 2],
        "trunc.png": chelsea[: len(chelsea) // 2],
        "empty.jpg": b"",
        "text.jpg": b"this is a text file, not a JPEG\n",
        "huge.jpg": patch_sof(good, 40000, 40000),
        "noperm.jpg": good,
    }
    for n, data in files.items():
        with open(os.path.join(cls, n), "wb") as f:
            f.write(data)
    os.mkdir(os.path.join(cls, "dir.jpg"))
    os.chmod(os.path.join(cls, "noperm.jpg"), 0)
    reasons = {
        "corrupt.jpg": "corrupt JPEG",
        "trunc.jpg": "truncated JPEG",
        "trunc.png": "corrupt PNG",
        "empty.jpg": "empty file",
        "text.jpg": "not a JPEG or PNG image",
        "dir.jpg": "not a regular file",
        "huge.jpg": "absurd image dimensions 40000x40000",
        "noperm.jpg": "Permission denied",
    }
    # root reads mode-000 files: drop to nobody then; a normal user cannot
    # read them anyway
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.geteuid() == 0 else []
    # nobody may not be able to reach the build dir (e.g. under /root): run a
    # copy of the helper from the temp dir (it is a self-contained binary; a
    # libtool wrapper script would have to stay where it is)
    dtool = tool("dataset_tool")
    with open(dtool, "rb") as f:
        if f.read(2) != b"#!":
            dtool = shutil.copy(dtool, os.path.join(tmp, "dataset_tool"))
            os.chmod(dtool, 0o755)

    # every sample once in index order: the bad ones report path + reason
    out = os.path.join(tmp, "out")
    os.mkdir(out)
    os.chmod(out, 0o777)
    p = subprocess.run(as_nobody + [dtool, "dump", root, "32", "train", os.path.join(out, "x.f32")],
                       capture_output=True, text=True)
    check(p.returncode == 0, f"train dump as nobody failed: {p.stderr}")
    bad = [l for l in p.stdout.splitlines() if l.startswith("bad ")]
    check(len(bad) == len(reasons), f"{len(bad)} bad samples reported, want {len(reasons)}: {bad}")
    for n, why in reasons.items():
        hit = [l for l in bad if f"/shirts/{n}: " in l]
        check(len(hit) == 1 and why in hit[0], f"{n}: want '{why}', got {hit}")

    # through the loader: replaced, logged once each, counted; 8 of 72 = 11%
    p = subprocess.run(as_nobody + [dtool, "epoch", root, "32", "train", "8", "3", "0.2"],
                       capture_output=True, text=True)
    check(p.returncode == 0, f"loader stopped below the limit: {p.stderr}")
    check(p.stdout.strip().startswith("samples 72 bad "), f"loader stats: {p.stdout}")
    nbad = int(p.stdout.split()[3]) if p.returncode == 0 else 0
    check(nbad >= len(reasons), f"only {nbad} bad samples counted")
    logs = [l for l in p.stderr.splitlines() if "bad sample replaced" in l]
    check(len(logs) == len(reasons), f"{len(logs)} log lines, want {len(reasons)} (once per file): {logs}")
    for n in reasons:
        check(sum(f"/shirts/{n}: " in l for l in logs) == 1, f"{n} not logged exactly once")
    # above the limit: a clear error
    p = subprocess.run(as_nobody + [dtool, "epoch", root, "32", "train", "8", "2", "0.05"],
                       capture_output=True, text=True)
    check(p.returncode == 2, f"loader did not stop above the limit: {p.stdout} {p.stderr}")
    errs = [l for l in p.stderr.splitlines() if not l.startswith("dljob: data: bad sample replaced")]
    check(len(errs) == 1 and "of 72 train samples are unusable, more than the allowed fraction 0.05" in errs[0],
          f"error: {errs}")

    # tree errors, before the first step
    def open_err(path):
        p = subprocess.run([tool("dataset_tool"), "dump", path, "32", "train", os.path.join(tmp, "y.f32")],
                           capture_output=True, text=True)
        return p.returncode, p.stderr.strip()

    t = os.path.join(tmp, "t1")
    os.makedirs(os.path.join(t, "val", "a"))
    rc, e = open_err(t)
    check(rc == 2 and e == f"{t}/train: missing (an ImageFolder dataset needs DIR/train/<class>/<image files>)", f"missing train: {e}")
    os.makedirs(os.path.join(t, "train"))
    rc, e = open_err(t)
    check(rc == 2 and e == f"{t}/train: no class directories", f"no classes: {e}")
    os.makedirs(os.path.join(t, "train", "a"))
    shutil.copy(os.path.join(root, "val", "shirts", "ok64.jpg"), os.path.join(t, "train", "a"))
    shutil.copy(os.path.join(root, "val", "shirts", "ok64.jpg"), os.path.join(t, "val", "a"))
    os.makedirs(os.path.join(t, "train", "b"))
    rc, e = open_err(t)
    check(rc == 2 and "classes differ" in e and "'b' is only in train" in e, f"class mismatch: {e}")
    os.makedirs(os.path.join(t, "val", "b"))
    shutil.copy(os.path.join(root, "val", "shirts", "ok64.jpg"), os.path.join(t, "val", "b"))
    rc, e = open_err(t)
    check(rc == 2 and e.startswith(f"{t}/train/b: empty class directory"), f"empty class: {e}")
    shutil.copy(os.path.join(root, "val", "shirts", "ok64.jpg"), os.path.join(t, "train", "b"))
    rc, e = open_err(t)
    check(rc == 0, f"fixed tree still fails: {e}")

    subprocess.run(["rm", "-rf", tmp])
    if failures:
        print(f"test_bad_inputs: {len(failures)} checks failed", file=sys.stderr)
        return 1
    print("test_bad_inputs: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
