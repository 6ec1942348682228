"""ImageFolder datasets against torchvision (the oracle, /usr/bin/python3).

Fixtures (see fixtures.py for where each image comes from) are built in a
temp dir: Fashion-MNIST images written as JPEG/PNG under class dirs whose
creation order differs from their sorted order, plus real photos and their
grayscale / progressive / CMYK / 16-bit / palette / RGBA variants.
Checks:
  - labels and sample order equal torchvision.datasets.ImageFolder's;
  - eval samples equal Resize(round(S/0.875))+CenterCrop(S)+Normalize on PIL
    within a mean abs diff of 1.5/255 per image (decoders differ slightly);
  - train samples equal resized_crop(+hflip) on PIL at the crop our
    RandomResizedCrop drew (reported by dataset_tool plan), within 2/255
    (merged upsampling and DCT-domain downscaling for training);
  - grayscale output has R == G == B, the CMYK JPEG is close to the RGB
    original;
  - the loader gives bit-identical batches with 1 and 3 worker threads;
  - the index cache is reused while dir mtimes are unchanged, rescanned after;
    a scan that saw a directory changed less than 2 s before it is not cached
    (a file added later in the same clock tick leaves the mtime as it was);
  - odd names as torchvision takes them (a newline, non-UTF-8 bytes, an
    upper-case extension, a symlink, a symlink loop: a bad sample), but for
    the documented differences: names starting with '.' (files and class
    dirs like .ipynb_checkpoints) are skipped, subdirectories of a class are
    not walked (torchvision walks them, even round a symlink loop),
    and .tif and the other PIL formats are not images;
  - a 16-bit grayscale PNG keeps its high byte, as 16-bit RGB does
    (documented difference: PIL 9 opens it as mode "I" and convert("RGB")
    clips every value above 255 to white).
"""
import os, subprocess, sys, tempfile, time
import numpy as np
import torch
import torchvision
import torchvision.transforms as T
import torchvision.transforms.functional as F
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixtures import check, failures, fmnist_images, photo_variants, tool

torch.set_num_threads(2)
MEAN = np.array([0.485, 0.456, 0.406], np.float32).reshape(3, 1, 1)
STD = np.array([0.229, 0.224, 0.225], np.float32).reshape(3, 1, 1)


def dump(root, size, split, cache=None):
    out = os.path.join(os.path.dirname(root), f"dump-{split}.f32")
    cmd = [tool("dataset_tool"), "dump", root, str(size), split, out] + ([cache] if cache else [])
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return None, None, p.stderr.strip()
    lines = p.stdout.splitlines()
    labels = []
    for l in lines[1:]:
        labels.append(int(l.split()[1]) if l.startswith("label") else l)
    x = np.fromfile(out, np.float32).reshape(len(labels), 3, size, size)
    return labels, x, lines[0]


def to255(chw):
    return (chw * STD + MEAN) * 255.0


def odd_names(tmp):
    root = os.path.join(tmp, "odd").encode()
    train = os.path.join(root, b"train")
    files = [b"a/x.png", b"a/.hidden.png", b"a/new\nline.png", b"a/bad\xffutf8.png", b"a/UP.PNG",
             "a/\u00e9t\u00e9.png".encode(), b"a/z.tif", b"a/sub/deep.png", b".ipynb_checkpoints/c.png",
             b"b/y.png"]
    for i, f in enumerate(files):
        path = os.path.join(train, f)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        Image.new("RGB", (24, 24), (10 * i, 250 - 10 * i, 100)).save(path, "TIFF" if f.endswith(b".tif") else "PNG")
    os.symlink(b"UP.PNG", os.path.join(train, b"a/link.png"))
    os.symlink(b"self.png", os.path.join(train, b"a/self.png"))
    os.symlink(b"..", os.path.join(train, b"a/up"))

    def color(path):
        try:
            with Image.open(path) as im:
                return im.convert("RGB").getpixel((0, 0))
        except OSError:
            return None

    # torchvision, less the documented differences
    tv = torchvision.datasets.ImageFolder(os.fsdecode(train))
    want = []
    for path, y in tv.samples:
        parts = os.path.relpath(path, os.fsdecode(train)).split(os.sep)
        if len(parts) == 2 and not any(p.startswith(".") for p in parts) and \
           os.path.splitext(parts[1])[1].lower() in (".jpg", ".jpeg", ".png"):
            want.append((tv.classes[y], color(path)))
    check(len(tv.samples) > 40 and ".ipynb_checkpoints" in tv.classes, f"torchvision: {len(tv.samples)} {tv.classes}")

    p = subprocess.run([tool("dataset_tool"), "dump", os.fsdecode(root), "24", "train", os.path.join(tmp, "odd.f32")],
                       capture_output=True, text=True, timeout=60)
    lines = p.stdout.splitlines()
    check(p.returncode == 0 and lines[:1] == ["classes 2 count %d" % len(want)], f"odd names: {p.returncode} {lines[:1]} {p.stderr}")
    if p.returncode == 0:
        x = np.fromfile(os.path.join(tmp, "odd.f32"), np.float32).reshape(len(lines) - 1, 3, 24, 24)
        got = []
        for l, chw in zip(lines[1:], x):
            if l.startswith("label "):
                rgb = tuple(int(round(v)) for v in to255(chw).mean(axis=(1, 2)))
                got.append((["a", "b"][int(l.split()[1])], rgb))
            else:
                got.append((["a", "b"][0 if "/train/a/" in l else 1], None))
        check(got == want, f"odd names: dljob {got} torchvision {want}")


def gray16(tmp):
    root = os.path.join(tmp, "gray16")
    os.makedirs(os.path.join(root, "train", "a"))
    path = os.path.join(root, "train", "a", "g.png")
    Image.fromarray(np.full((16, 16), 0x4080, np.uint16)).save(path)
    with Image.open(path) as im:
        check(im.convert("RGB").getpixel((0, 0)) == (255, 255, 255),
              f"PIL no longer clips a 16-bit gray PNG ({im.mode}): update doc/training.md and dljob(1)")
    labels, x, head = dump(root, 16, "train")
    check(labels == [0] and np.allclose(to255(x[0]), 0x40, atol=0.01),
          f"16-bit gray PNG: {head} {labels} {None if x is None else to255(x[0]).mean()}")


def main():
    tmp = tempfile.mkdtemp(prefix="dljob-if-")
    root = os.path.join(tmp, "folder")
    size = 112
    imgs, ys = fmnist_images(40)
    # class dirs created in non-sorted order; strcmp order is Apple, mango, zebra
    classes = ["zebra", "Apple", "mango"]
    for split in ["train", "val"]:
        for c in classes:
            os.makedirs(os.path.join(root, split, c))
    for i in range(40):
        c = classes[int(ys[i]) % 3]
        split = "train" if i < 30 else "val"
        ext = [".jpg", ".JPEG", ".png", ".jpeg"][i % 4]
        Image.fromarray(imgs[i]).save(os.path.join(root, split, c, f"fm{i:03d}{ext}"), quality=95)
    # photos: the variants go to val (eval compare) and, once more, to train
    names = photo_variants(os.path.join(root, "val", "mango"))
    for n in names:
        os.link(os.path.join(root, "val", "mango", n), os.path.join(root, "train", "Apple", "p_" + n))
    with open(os.path.join(root, "train", "zebra", "notes.txt"), "w") as f:
        f.write("not an image, not an image extension: ignored\n")

    for split, tvdir in [("train", "train"), ("eval", "val")]:
        labels, x, head = dump(root, size, split)
        check(labels is not None, f"dump {split} failed: {head}")
        if labels is None:
            continue
        ref = torchvision.datasets.ImageFolder(os.path.join(root, tvdir))
        check(head == f"classes 3 count {len(ref.samples)}", f"{split}: header '{head}', torchvision has {len(ref.samples)}")
        check(labels == ref.targets, f"{split}: labels {labels} != torchvision {ref.targets}")
        check(ref.classes == ["Apple", "mango", "zebra"], f"torchvision classes {ref.classes}")
        for i, (path, _) in enumerate(ref.samples):
            if i >= len(x):
                break
            img = Image.open(path).convert("RGB")
            if split == "eval":
                want = T.Compose([T.Resize(round(size / 0.875)), T.CenterCrop(size), T.ToTensor()])(img).numpy() * 255
                tol = 1.5
            else:
                p = subprocess.run([tool("dataset_tool"), "plan", path, str(size), str(12345 + i)],
                                   capture_output=True, text=True, check=True)
                top, left, h, w, flip = map(int, p.stdout.split())
                t = F.resized_crop(img, top, left, h, w, [size, size])
                if flip:
                    t = F.hflip(t)
                want = F.to_tensor(t).numpy() * 255
                # training crops use merged chroma upsampling (and, for big
                # images, DCT-domain downscaling): a little further from PIL
                tol = 2.0
            got = to255(x[i])
            d = np.abs(got - want).mean()
            check(d < tol, f"{split} {os.path.basename(path)}: mean abs diff {d:.2f}/255 vs PIL (tolerance {tol})")
            base = os.path.basename(path)
            if "gray" in base or base.startswith("fm") or base.startswith("p_fm"):
                spread = np.abs(got[0] - got[1]).max() + np.abs(got[1] - got[2]).max()
                check(spread < 0.51, f"{split} {base}: grayscale gives R,G,B differing by {spread:.2f}")
            if split == "eval" and base == "chelsea_cmyk.jpg":
                orig = [j for j, (q, _) in enumerate(ref.samples) if q.endswith("/chelsea.png")][0]
                d2 = np.abs(got - to255(x[orig])).mean()
                check(d2 < 8.0, f"CMYK chelsea differs from the RGB original by {d2:.2f}/255")
            print(f"{split} {base}: mean abs diff {d:.3f}/255")

    # the loader on real images with real augmentation: the same batches
    # whatever the thread count
    sums = {}
    for split in ["train", "eval"]:
        for threads in [1, 3]:
            p = subprocess.run([tool("dataset_tool"), "epoch", root, "48", split, "5", str(threads), "0.01"],
                               capture_output=True, text=True)
            check(p.returncode == 0, f"epoch {split} threads={threads}: {p.stderr}")
            sums[split, threads] = p.stdout.split()[-1] if p.returncode == 0 else None
        check(sums[split, 1] is not None and sums[split, 1] == sums[split, 3],
              f"{split}: batches differ between 1 and 3 threads: {sums[split, 1]} vs {sums[split, 3]}")

    # the index cache: reused while the directories keep their mtime, ctime
    # and inode (a scan right after a change is not cached, see below: let
    # the tree age, as utime cannot set a ctime back)
    time.sleep(2.1)
    cache = os.path.join(tmp, "cache")
    os.makedirs(cache)
    labels, _, head = dump(root, 32, "train", cache)
    check(labels is not None and len(os.listdir(cache)) == 1, f"no cache file written: {os.listdir(cache)} {head}")
    cfile = os.path.join(cache, os.listdir(cache)[0])
    written = os.stat(cfile).st_mtime_ns
    labels, _, head = dump(root, 32, "train", cache)
    check(labels is not None and os.stat(cfile).st_mtime_ns == written, "unchanged tree: the cache was rewritten")
    # a file renamed and the dir's mtime put back (rsync -a, cp -p do that):
    # the ctime moved, so the cache is not used
    zdir = os.path.join(root, "train", "zebra")
    victim = sorted(n for n in os.listdir(zdir) if n.startswith("fm"))[0]
    st = os.stat(zdir)
    os.rename(os.path.join(zdir, victim), os.path.join(zdir, "renamed_" + victim))
    os.utime(zdir, ns=(st.st_atime_ns, st.st_mtime_ns))
    labels, _, head = dump(root, 32, "train", cache)
    bad = [l for l in (labels or []) if isinstance(l, str)]
    check(labels is not None and not bad, f"stale cache used for a dir changed behind a restored mtime: {bad}")

    # racily clean: a class dir scanned in the clock tick it changed in, then
    # a file added in that tick (mtime put back as it was): the first scan
    # was not cached, so the second one finds the file
    racy = os.path.join(tmp, "racy")
    adir = os.path.join(racy, "train", "a")
    os.makedirs(adir)
    Image.fromarray(imgs[0]).save(os.path.join(adir, "x.png"))
    cache = os.path.join(tmp, "cache-racy")
    os.makedirs(cache)
    st = os.stat(adir)
    _, _, head = dump(racy, 32, "train", cache)
    check(head == "classes 1 count 1", f"racy tree: {head}")
    Image.fromarray(imgs[1]).save(os.path.join(adir, "y.png"))
    os.utime(adir, ns=(st.st_atime_ns, st.st_mtime_ns))
    _, _, head = dump(racy, 32, "train", cache)
    check(head == "classes 1 count 2", f"a scan of a just-changed dir was cached and reused: {head}")

    odd_names(tmp)
    gray16(tmp)
    subprocess.run(["rm", "-rf", tmp])
    if failures:
        print(f"test_imagefolder: {len(failures)} checks failed", file=sys.stderr)
        return 1
    print("test_imagefolder: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
