#!/bin/bash
# fashion-mnist's per-node cache (engine/data/fashion_mnist.c): the first run
# inflates the .gz files into $TMPDIR/dljob-cache-UID (mode 0700, files
# 0600, byte for byte the inflated IDX files, no temporary left); later runs
# map them instead of inflating (shown by tampering with the cached images:
# the weights change), with the same result as a cold run; a cache directory
# open to others, a symlink in its place or a changed source is not used;
# three runs starting together on a cold cache all succeed alike.
. "$DLJOB_SRCDIR/tests/lib.sh"
need_file "$DLJOB_BIN"
work=$(mktemp -d /tmp/dljob-fmcache.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
# Small gzip'd IDX files (64 train, 16 test images of 28x28).
"$TORCH_PYTHON" - <<'PY' || { fail "cannot write the IDX fixture"; finish; }
import gzip, os, random, struct
random.seed(5)
os.makedirs("fm")
for split, n in (("train", 64), ("t10k", 16)):
    px = bytes(random.randrange(256) for _ in range(n * 28 * 28))
    lb = bytes(random.randrange(10) for _ in range(n))
    with gzip.open("fm/%s-images-idx3-ubyte.gz" % split, "wb") as f:
        f.write(struct.pack(">IIII", 2051, n, 28, 28) + px)
    with gzip.open("fm/%s-labels-idx1-ubyte.gz" % split, "wb") as f:
        f.write(struct.pack(">II", 2049, n) + lb)
PY
export TMPDIR=$work/tmp
mkdir -p "$TMPDIR"
cache=$TMPDIR/dljob-cache-$(id -u)
run() { # OUT: train 2 steps, weights in OUT/model.safetensors
	OMP_NUM_THREADS=1 "$DLJOB_BIN" --model convnet --backend cpu --threads 1 --data fashion-mnist:"$work/fm" \
		--batch 8 --steps 2 --eval 0 --seed 3 --out "$work/$1" >"$work/$1.log" 2>&1
}

check "cold run" run cold
check "the cache directory is made, mode 700" test "$(stat -c %a "$cache" 2>/dev/null)" = 700
check "it holds the 4 inflated files, mode 600" test "$(find "$cache" -name '*.idx' -perm 600 | wc -l)" = 4
ok_files=1
for f in fm/*.gz; do
	zcat "$f" >plain
	m=$(for c in "$cache"/*.idx; do cmp -s plain "$c" && echo "$c"; done)
	[ -n "$m" ] || ok_files=0
done
check "each cached file is its .gz inflated, byte for byte" test $ok_files = 1
check "no temporary file left" test -z "$(find "$cache" -name '*.tmp')"

check "warm run" run warm
check "warm run = cold run (same weights)" cmp -s cold/model.safetensors warm/model.safetensors
# Tamper with the cached training images: a run that maps them trains on
# zeros and ends elsewhere.
img=$(for c in "$cache"/*.idx; do [ "$(stat -c %s "$c")" = $((16 + 64 * 784)) ] && echo "$c"; done)
"$TORCH_PYTHON" -c "
import sys
with open(sys.argv[1], 'r+b') as f:
    f.seek(16); f.write(bytes(64 * 784))" "$img"
check "tampered cache" run tampered
check "the cache is what a warm run reads (tampered images change the weights)" \
	test -n "$(cmp cold/model.safetensors tampered/model.safetensors 2>&1)"

# A cache directory others may write to is not used.
chmod 755 "$cache"
check "run with the cache directory open to others" run open
check "... the cache was not used (weights of the cold run)" cmp -s cold/model.safetensors open/model.safetensors
chmod 700 "$cache"

# A changed source (a new mtime) is a miss: inflated again, not the stale copy.
touch fm/train-images-idx3-ubyte.gz
check "run after the source changed" run changed
check "... the stale cached copy was not used" cmp -s cold/model.safetensors changed/model.safetensors

# A symlink where the cache directory should be is not followed.
rm -rf "$cache"
mkdir "$work/elsewhere"
ln -s "$work/elsewhere" "$cache"
check "run with a symlink as the cache directory" run symlink
check "... nothing was written through the symlink" test -z "$(ls -A "$work/elsewhere")"
check "... same weights" cmp -s cold/model.safetensors symlink/model.safetensors
rm -f "$cache"

# Three runs at once on a cold cache: all succeed, all alike.
for i in 1 2 3; do run "many$i" & eval "p$i=$!"; done
# shellcheck disable=SC2154 # p1..p3 set by eval
for i in 1 2 3; do p=p$i; check "concurrent run $i" wait "${!p}"; done
for i in 1 2 3; do
	check "concurrent run $i = cold run" cmp -s cold/model.safetensors "many$i/model.safetensors"
done
check "4 cached files, no temporary left" test "$(find "$cache" -name '*.idx' | wc -l)" = 4 -a \
	-z "$(find "$cache" -name '*.tmp')"
finish
