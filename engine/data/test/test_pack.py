"""dljob pack round trip: the same images and labels come out of the shards as
out of the folder.

Fixture (built here; see fixtures.py): an ImageFolder of Fashion-MNIST
images as JPEG and PNG plus the Debian sample photos and their variants, and
two unusable files that pack must report and leave out.  Packed with
dl_pack_main (engine/data/test/pack_tool; also `$DLJOB_BIN pack` when the dljob
executable has the sub-command), small shards so there are several:
  - default: JPEGs stored byte for byte -> identical samples; PNGs become
    JPEG q95 -> within 3/255 (6/255 for random train crops);
  - --keep-png: every sample identical;
  - --max-side 160: short sides capped (read back from the stored JPEGs),
    eval samples within 12/255 of the originals;
  - the index is written last: a DST without it is not taken for shards.
"""
import os, struct, subprocess, sys, tempfile
import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixtures import check, failures, fmnist_images, photo_variants, tool


def dump(spec, size, split, out):
    p = subprocess.run([tool("dataset_tool"), "dump", spec, str(size), split, out], capture_output=True, text=True)
    if p.returncode != 0:
        return None, None, p.stderr.strip()
    lines = p.stdout.splitlines()
    labels = [l for l in lines[1:]]
    x = np.fromfile(out, np.float32).reshape(len(labels), 3, size, size)
    return labels, x, lines[0]


def read_index(d):
    """Parse dljob-shards.idx (layout in engine/data/shards.h)."""
    b = open(os.path.join(d, "dljob-shards.idx"), "rb").read()
    assert b[:8] == b"DLJOBSH1"
    ver, nsh, ncl = struct.unpack_from("<QQQ", b, 8)
    p = 32
    classes = []
    for _ in range(ncl):
        (n,) = struct.unpack_from("<Q", b, p)
        classes.append(b[p + 8:p + 8 + n].decode())
        p += 8 + n
    splits = []
    for _ in range(2):
        (cnt,) = struct.unpack_from("<Q", b, p)
        p += 8
        recs = []
        for _ in range(cnt):
            shard, label, off, size, fmt, _r, nl = struct.unpack_from("<IIQIBBH", b, p)
            name = b[p + 24:p + 24 + nl].decode()
            recs.append((shard, label, off, size, fmt, name))
            p += 24 + nl
        splits.append(recs)
    assert p == len(b)
    return nsh, classes, splits


def main():
    tmp = tempfile.mkdtemp(prefix="dljob-pack-")
    root = os.path.join(tmp, "folder")
    imgs, ys = fmnist_images(60)
    for i in range(60):
        split = "train" if i < 48 else "val"
        d = os.path.join(root, split, f"c{int(ys[i]) % 4}")
        os.makedirs(d, exist_ok=True)
        Image.fromarray(imgs[i]).save(os.path.join(d, f"fm{i:02d}" + (".png" if i % 3 == 0 else ".jpg")), quality=90)
    for split in ["train", "val"]:
        for c in range(4):
            os.makedirs(os.path.join(root, split, f"c{c}"), exist_ok=True)
            if not os.listdir(os.path.join(root, split, f"c{c}")):
                Image.fromarray(imgs[c]).save(os.path.join(root, split, f"c{c}", "filler.jpg"))
    photo_variants(os.path.join(root, "train", "c1"))
    photo_variants(os.path.join(root, "val", "c2"))
    with open(os.path.join(root, "train", "c3", "zz_broken.jpg"), "wb") as f:
        f.write(b"\xff\xd8\xff\xe0 not really")
    open(os.path.join(root, "train", "c3", "zz_empty.png"), "wb").close()
    size = 64

    # the folder's samples, minus the two bad ones pack leaves out
    ref = {}
    for split in ["train", "eval"]:
        labels, x, head = dump(root, size, split, os.path.join(tmp, "ref.f32"))
        check(labels is not None, f"folder dump: {head}")
        keep = [i for i, l in enumerate(labels) if l.startswith("label")]
        check(len(labels) - len(keep) == (2 if split == "train" else 0), f"{split}: {len(labels) - len(keep)} bad in the folder")
        ref[split] = ([labels[i] for i in keep], x[keep])

    packers = [[tool("pack_tool")]]
    dljob = os.environ.get("DLJOB_BIN")
    if dljob and os.path.exists(dljob) and subprocess.run([dljob, "pack", "--help"], capture_output=True).returncode == 0:
        packers.append([dljob, "pack"])
    else:
        print("note: $DLJOB_BIN has no pack sub-command yet; packing through dl_pack_main only")

    for packer in packers:
        for variant, extra, tol in [("default", [], 3.0), ("keep-png", ["--keep-png"], 0.0), ("max-side", ["--max-side", "160"], 12.0)]:
            dst = os.path.join(tmp, "shards-" + variant)
            p = subprocess.run(packer + [root, dst, "--shard-size", "1", "--threads", "2"] + extra,
                               capture_output=True, text=True)
            check(p.returncode == 0, f"{variant}: pack failed: {p.stderr}")
            if p.returncode != 0:
                continue
            check("skipping train/c3/zz_broken.jpg: corrupt JPEG" in p.stderr and "skipping train/c3/zz_empty.png: empty file" in p.stderr,
                  f"{variant}: bad files not reported: {p.stderr}")
            nsh, classes, splits = read_index(dst)
            check(nsh >= (1 if variant == "max-side" else 2) and classes == ["c0", "c1", "c2", "c3"], f"{variant}: {nsh} shards, classes {classes}")
            check(not any(n.startswith(".") for n in os.listdir(dst)), f"{variant}: temp files left: {os.listdir(dst)}")
            for split, recs in zip(["train", "eval"], splits):
                labels, x, head = dump(dst, size, split, os.path.join(tmp, "got.f32"))
                check(labels is not None, f"{variant} {split}: {head}")
                if labels is None:
                    continue
                rl, rx = ref[split]
                check(labels == rl, f"{variant} {split}: labels differ from the folder's")
                if labels != rl or len(x) != len(rx):
                    continue
                names = [r[5] for r in recs]
                if variant == "max-side" and split == "train":
                    continue  # other image sizes draw other random crops: labels only
                for i in range(len(x)):
                    d = np.abs(x[i] - rx[i]).mean() * 0.226 * 255
                    exact = tol == 0.0 or (variant == "default" and not names[i].endswith(".png"))
                    # a random crop of a re-encoded 28x28 image magnifies JPEG artefacts
                    t = tol * 2 if split == "train" else tol
                    if exact:
                        check(d == 0.0, f"{variant} {split} {names[i]}: differs from the folder by {d:.3f}/255, want identical")
                    else:
                        check(d < t, f"{variant} {split} {names[i]}: differs from the folder by {d:.2f}/255 (tolerance {t})")
            if variant == "max-side":
                for shard, label, off, sz, fmt, name in splits[0] + splits[1]:
                    with open(os.path.join(dst, f"shard-{shard:05d}.bin"), "rb") as f:
                        f.seek(off)
                        data = f.read(sz)
                    import io
                    im = Image.open(io.BytesIO(data))
                    check(min(im.size) <= 160, f"max-side: {name} stored at {im.size}")

    # the data's fingerprints (what a checkpoint records): a tree and its
    # shards agree, once the files pack left out are gone from the tree too;
    # a renamed file changes the samples' one, a renamed class the classes'
    def fingerprint(spec):
        p = subprocess.run([tool("dataset_tool"), "fingerprint", spec], capture_output=True, text=True)
        check(p.returncode == 0, f"fingerprint {spec}: {p.stderr}")
        return p.stdout.split()
    os.unlink(os.path.join(root, "train", "c3", "zz_broken.jpg"))
    os.unlink(os.path.join(root, "train", "c3", "zz_empty.png"))
    tree = fingerprint(root)
    for variant in ["default", "keep-png", "max-side"]:
        got = fingerprint(os.path.join(tmp, "shards-" + variant))
        check(got == tree, f"fingerprints of shards-{variant} {got} and of its tree {tree} differ")
    first = sorted(os.listdir(os.path.join(root, "train", "c0")))[0]
    os.rename(os.path.join(root, "train", "c0", first), os.path.join(root, "train", "c0", "zz" + first))
    moved = fingerprint(root)
    check(moved[0] == tree[0] and moved[1] != tree[1], f"a renamed file: fingerprints {tree} -> {moved}")
    for split in ["train", "val"]:
        os.rename(os.path.join(root, split, "c3"), os.path.join(root, split, "d3"))
    renamed = fingerprint(root)
    check(renamed[0] != moved[0] and renamed[1] == moved[1], f"a renamed class: fingerprints {moved} -> {renamed}")

    # interrupted pack: shards without an index are not a dataset
    dst = os.path.join(tmp, "shards-default")
    os.unlink(os.path.join(dst, "dljob-shards.idx"))
    labels, x, head = dump(dst, size, "train", os.path.join(tmp, "got.f32"))
    check(labels is None and "train: missing" in head, f"index-less DST opened: {head}")

    subprocess.run(["rm", "-rf", tmp])
    if failures:
        print(f"test_pack: {len(failures)} checks failed", file=sys.stderr)
        return 1
    print("test_pack: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
