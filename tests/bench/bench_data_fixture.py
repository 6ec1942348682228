"""Build an ImageNet-like ImageFolder for tests/bench/bench_data.sh:
N JPEGs of about 500x375 (some portrait), quality 90, cut at random places and
scales out of the photos Debian ships with python3-skimage and python3-sklearn
(so content varies), spread over 10 classes.  Usage: bench_data_fixture.py DIR N"""
import os, random, sys
from PIL import Image

SK = "/usr/lib/python3/dist-packages/skimage/data"
SL = "/usr/lib/python3/dist-packages/sklearn/datasets/images"
SRC = [f"{SL}/china.jpg", f"{SL}/flower.jpg", f"{SK}/astronaut.png", f"{SK}/chelsea.png", f"{SK}/coffee.png",
       f"{SK}/hubble_deep_field.jpg", f"{SK}/motorcycle_left.png", f"{SK}/rocket.jpg", f"{SK}/coins.png",
       f"{SK}/immunohistochemistry.png", f"{SK}/retina.jpg", f"{SK}/page.png"]


def main():
    root, n = sys.argv[1], int(sys.argv[2])
    rnd = random.Random(0)
    photos = [Image.open(p).convert("RGB") for p in SRC if os.path.exists(p)]
    for i in range(n):
        img = rnd.choice(photos)
        w, h = (500, 375) if rnd.random() < 0.8 else (375, 500)
        s = rnd.uniform(0.5, 1.0)
        cw, ch = int(img.width * s), int(img.height * s)
        x, y = rnd.randint(0, img.width - cw), rnd.randint(0, img.height - ch)
        out = img.crop((x, y, x + cw, y + ch)).resize((w, h), Image.BILINEAR)
        d = os.path.join(root, "train", f"n{i % 10:08d}")
        os.makedirs(d, exist_ok=True)
        out.save(os.path.join(d, f"img{i:05d}.JPEG"), quality=90)
        if i % 10 == 0:
            v = os.path.join(root, "val", f"n{i % 10:08d}")
            os.makedirs(v, exist_ok=True)
    for c in range(10):  # every class needs val images too
        d = os.path.join(root, "val", f"n{c:08d}")
        os.makedirs(d, exist_ok=True)
        photos[c % len(photos)].resize((500, 375)).save(os.path.join(d, "val0.JPEG"), quality=90)


if __name__ == "__main__":
    main()
