"""Fixture builders shared by the data tests (run under /usr/bin/python3).

Images come from Debian packages, nothing is downloaded:
  - Fashion-MNIST (dataset-fashion-mnist): /usr/share/datasets/fashion-mnist
  - scikit-image sample photos (python3-skimage): astronaut, chelsea, coffee
    PNGs, green_palette.png (palette), logo.png (RGBA)
  - scikit-learn sample photos (python3-sklearn): china.jpg, flower.jpg
Variants are made with Debian's tools: cjpeg -grayscale and jpegtran
-progressive (libjpeg-turbo-progs), ImageMagick convert -colorspace CMYK
(an Adobe-marker, inverted-CMYK JPEG) and -depth 16 (16-bit PNG); PIL
upscales china.jpg to 2560x1708 for the DCT-scaled decode path."""
import gzip, os, shutil, subprocess, sys
import numpy as np
from PIL import Image

FMNIST = "/usr/share/datasets/fashion-mnist"
SKIMAGE = "/usr/lib/python3/dist-packages/skimage/data"
SKLEARN = "/usr/lib/python3/dist-packages/sklearn/datasets/images"
CONVERT = "/usr/bin/convert" if os.path.exists("/usr/bin/convert") else "convert"


# Every check the tests make; a test exits 1 when this is not empty.
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg, file=sys.stderr)


def tool(name):
    return os.path.join(os.environ.get("DLJOB_BUILDDIR", "."), "engine", "data", "test", name)


def fmnist_images(n, split="train"):
    """First n Fashion-MNIST images (uint8 28x28) and labels."""
    with gzip.open(os.path.join(FMNIST, f"{split}-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16)[: n * 784].reshape(n, 28, 28)
    with gzip.open(os.path.join(FMNIST, f"{split}-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8)[:n]
    return x, y


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, **kw)


def photo_variants(dst):
    """Write the photo fixtures into dst; returns their file names."""
    os.makedirs(dst, exist_ok=True)
    names = []
    for src in [f"{SKLEARN}/china.jpg", f"{SKLEARN}/flower.jpg", f"{SKIMAGE}/chelsea.png",
                f"{SKIMAGE}/coffee.png", f"{SKIMAGE}/green_palette.png", f"{SKIMAGE}/logo.png"]:
        shutil.copy(src, dst)
        names.append(os.path.basename(src))
    # grayscale JPEG from cjpeg (input: binary PPM written by PIL)
    Image.open(f"{SKIMAGE}/astronaut.png").convert("RGB").save(f"{dst}/astronaut.ppm")
    with open(f"{dst}/astronaut_gray.jpg", "wb") as out:
        subprocess.run(["cjpeg", "-grayscale", "-quality", "90", f"{dst}/astronaut.ppm"], stdout=out, check=True)
    os.unlink(f"{dst}/astronaut.ppm")
    names.append("astronaut_gray.jpg")
    # progressive JPEG
    with open(f"{dst}/flower_progressive.jpg", "wb") as out:
        subprocess.run(["jpegtran", "-progressive", f"{SKLEARN}/flower.jpg"], stdout=out, check=True)
    names.append("flower_progressive.jpg")
    # CMYK JPEG (ImageMagick writes an Adobe marker and inverted CMYK)
    run([CONVERT, f"{SKIMAGE}/chelsea.png", "-colorspace", "CMYK", "-quality", "92", f"{dst}/chelsea_cmyk.jpg"])
    names.append("chelsea_cmyk.jpg")
    # a large photo (china.jpg upscaled by PIL): decoded with DCT-domain
    # downscaling, which only pays for images >= 2x the output
    Image.open(f"{SKLEARN}/china.jpg").resize((2560, 1708), Image.BICUBIC).save(f"{dst}/china_big.jpg", quality=92)
    names.append("china_big.jpg")
    # a valid JPEG followed by a 20 KB vendor trailer (as phones write)
    with open(f"{dst}/flower_trailer.jpg", "wb") as out:
        out.write(open(f"{SKLEARN}/flower.jpg", "rb").read() + b"TRAILER" * 3000)
    names.append("flower_trailer.jpg")
    # 16-bit PNG
    run([CONVERT, f"{SKIMAGE}/coffee.png", "-depth", "16", f"{dst}/coffee16.png"])
    names.append("coffee16.png")
    return names
