#!/usr/bin/python3
"""Write a tiny ImageFolder for tests: DIR/{train,val}/<class>/<i>.png, solid
32x32 colours (class c: one dominant channel, brightness step STEP per image).

    tiny_imagefolder.py DIR [PER_CLASS] [STEP] [CLASSES]   (defaults 4, 10, red,blue)
"""
import os
import sys

from PIL import Image

COLOURS = {"red": (200, 10, 10), "blue": (10, 10, 200), "green": (10, 200, 10)}


def main():
    root = sys.argv[1]
    per = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    step = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    classes = sys.argv[4].split(",") if len(sys.argv) > 4 else ["red", "blue"]
    for split in ("train", "val"):
        for c in classes:
            d = os.path.join(root, split, c)
            os.makedirs(d)
            for i in range(per):
                rgb = tuple(min(255, v + step * i) for v in COLOURS[c])
                Image.new("RGB", (32, 32), rgb).save(os.path.join(d, f"{i}.png"))


if __name__ == "__main__":
    main()
