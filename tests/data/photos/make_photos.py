#!/usr/bin/python3
"""Write the small ImageFolder in tests/data/photos/ (run once; the output is
committed, so the tests read nothing from outside the repository).

Four classes, one CC0 / public-domain photo each, from scikit-image's sample
data (Debian python3-skimage, see SOURCES.md): random crops of 30-80% of the
photo's sides, any aspect ratio, resized (PIL, antialiased) so the short
side is 36-72 px.  Most are RGB JPEGs; some are grayscale JPEGs, RGB PNGs,
grayscale ("L") PNGs and palette ("P") PNGs, so the loaders' conversions to
RGB (PIL's convert('RGB')) are exercised.  Deterministic (seeded).

    make_photos.py [OUT_DIR]   (default: beside this script)"""
import os
import random
import sys

from PIL import Image

SKIMAGE = "/usr/lib/python3/dist-packages/skimage/data"
CLASSES = {"astronaut": "astronaut.png", "cat": "chelsea.png", "coffee": "coffee.png", "rocket": "rocket.jpg"}
PER_SPLIT = {"train": 24, "val": 16}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    rng = random.Random(16)
    for cls, fname in CLASSES.items():
        src = Image.open(os.path.join(SKIMAGE, fname)).convert("RGB")
        w, h = src.size
        for split, n in PER_SPLIT.items():
            d = os.path.join(out, split, cls)
            os.makedirs(d, exist_ok=True)
            for i in range(n):
                cw, ch = int(w * rng.uniform(0.3, 0.8)), int(h * rng.uniform(0.3, 0.8))
                x0, y0 = rng.randrange(0, w - cw + 1), rng.randrange(0, h - ch + 1)
                crop = src.crop((x0, y0, x0 + cw, y0 + ch))
                short = rng.randint(36, 72)
                s = short / min(cw, ch)
                crop = crop.resize((max(1, round(cw * s)), max(1, round(ch * s))), Image.BILINEAR)
                kind = rng.random()
                base = os.path.join(d, f"{i:02d}")
                if kind < 0.70:
                    crop.save(base + ".jpg", quality=80)
                elif kind < 0.80:
                    crop.convert("L").save(base + ".jpg", quality=80)
                elif kind < 0.88:
                    crop.save(base + ".png", optimize=True)
                elif kind < 0.95:
                    crop.convert("L").save(base + ".png", optimize=True)
                else:
                    crop.convert("P", palette=Image.ADAPTIVE, colors=64).save(base + ".png", optimize=True)


if __name__ == "__main__":
    main()
