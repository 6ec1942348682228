#!/bin/bash
# An ImageFolder's scan is cached next to the output (--out) and reused by the
# next run (a resume, a requeued job) while the tree is unchanged; a changed
# tree is scanned again.  A run refused by its checks writes nothing.  A cache
# of another user, writable by group or others, in such a directory, or a
# symlink, is not used (a note on stderr) and is replaced, not written through.
. "$DLJOB_SRCDIR/tests/lib.sh"
need_file "$DLJOB_BIN"
work=$(mktemp -d /tmp/dljob-idx.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
# A tiny ImageFolder made here: 2 classes x 3 PNGs per split.  The cache is
# keyed on each directory's mtime, ctime and inode: a tree whose contents
# change while its mtimes are set back (rsync -a, cp -p, touch -d) is scanned
# again.
"$TORCH_PYTHON" "$DLJOB_SRCDIR/tests/tiny_imagefolder.py" data 3 20 || { fail "cannot write the dataset"; finish; }
# a scan of directories changed less than 2 s before it is not cached (the
# tree may still be changing within their ctime's clock tick): let it age
# (touch -d cannot: it sets the ctime to now)
age() { sleep 2.1; }
age
run() { OMP_NUM_THREADS=1 "$DLJOB_BIN" --model resnet20 --data "$work/data" --image-size 32 --batch 2 --steps 1 --eval 0 --out "$work/out" "$@" >>log 2>&1; }

"$DLJOB_BIN" --model resnet20 --data "$work/data" --batch 999 --out "$work/refused" >>log 2>&1
check "a refused run (batch larger than the split) creates no --out" test ! -e refused
check "first run" run
idx=$(ls out/imagefolder-*.idx 2>/dev/null)
check "the scan index is cached in --out ($idx)" test -n "$idx"
m1=$(stat -c %Y.%y "$idx")
sleep 1.1
check "second run in the same --out" run
check "unchanged tree: the index was reused, not rewritten" test "$(stat -c %Y.%y "$idx")" = "$m1"
"$TORCH_PYTHON" -c 'from PIL import Image; Image.new("RGB", (32, 32)).save("data/train/red/3.png")'
age
check "third run after adding an image" run
check "changed tree: the index was rewritten" test "$(stat -c %Y.%y "$idx")" != "$m1"
out=$("$DLJOB_BIN" --model resnet20 --data "$work/data" --batch 8 --out "$work/x" 2>&1)
check "the rescan sees the new image (7 training samples): $out" grep -q "(7 samples)" <<<"$out"

# What rsync -a and cp -p do: a class dir's contents change, then its old
# mtime is put back.  The cache must not be used (it would list 7 samples).
m2=$(stat -c %Y.%y "$idx")
old=$(stat -c %y data/train/red)
"$TORCH_PYTHON" -c 'from PIL import Image; Image.new("RGB", (32, 32)).save("data/train/red/4.png")'
touch -d "$old" data/train/red
check "the mtime of data/train/red is the old one again" test "$(stat -c %y data/train/red)" = "$old"
age
check "fourth run after adding an image behind a restored mtime" run
check "mtime-restored tree: the index was rewritten" test "$(stat -c %Y.%y "$idx")" != "$m2"
out=$("$DLJOB_BIN" --model resnet20 --data "$work/data" --batch 9 --out "$work/out" 2>&1)
check "the index in --out lists the new image (8 training samples): $out" grep -q "(8 samples)" <<<"$out"
# a class dir replaced by another one with the same mtime (rsync --delay-updates,
# mv of a copy made with cp -a): same listing here, other directory
m3=$(stat -c %Y.%y "$idx")
oldval=$(stat -c %y data/val)
cp -a data/val/blue data/val/blue.new && rm -r data/val/blue && mv data/val/blue.new data/val/blue
touch -d "$oldval" data/val
age
check "fifth run after replacing a class dir" run
check "replaced class dir: the index was rewritten" test "$(stat -c %Y.%y "$idx")" != "$m3"
m4=$(stat -c %Y.%y "$idx")
sleep 1.1
check "sixth run, tree unchanged" run
check "unchanged tree again: the index was reused" test "$(stat -c %Y.%y "$idx")" = "$m4"
# The cache is trusted only as this user's, in a directory of this user, and
# writable by nobody else (as the node cache of Fashion-MNIST files): a
# listing planted by someone else is not used.  forge: the cache minus its
# last training record, stamps intact, so only its listing is wrong.
forge() { "$TORCH_PYTHON" - "$idx" <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read()
u = lambda o: struct.unpack_from("=Q", b, o)[0]
o = 8; o += 8 + u(o); nc = u(o); o += 8 + (2 + 2 * nc) * 24
for _ in range(nc): o += 8 + u(o)
cnt_at = o; n = u(o); o += 8
for i in range(n):
    last = o; o += 8; o += 8 + u(o)
out = b[:cnt_at] + struct.pack("=Q", n - 1) + b[cnt_at + 8:last] + b[o:]
open(sys.argv[1], "wb").write(out)
PY
}
samples() { "$DLJOB_BIN" --model resnet20 --data "$work/data" --batch 99 --out "$work/out" 2>&1; }
check "forge the index cache" forge
chmod 644 "$idx"
out=$(samples)
check "a forged cache of ours is used (7 of the 8 training samples; the test can fail): $out" grep -q "(7 samples)" <<<"$out"
chmod g+w "$idx"
out=$(samples)
check "a group-writable cache is not used (8 samples): $out" grep -q "(8 samples)" <<<"$out"
check "and stderr says which file and why" grep -q "not using the index cache $work/out/imagefolder-[0-9a-f]*\.idx: writable by its group; scanning" <<<"$out"
check "once" test "$(grep -c "index cache" <<<"$out")" = 1
chmod 644 "$idx"
chown nobody "$idx"
out=$(samples)
check "a cache owned by another user (nobody) is not used (8 samples): $out" grep -q "(8 samples)" <<<"$out"
check "and stderr says so" grep -q "not using the index cache $work/out/imagefolder-[0-9a-f]*\.idx: owned by another user" <<<"$out"
chown "$(id -u)" "$idx"
chmod g+w out
out=$(samples)
check "a cache in a group-writable directory is not used (8 samples): $out" grep -q "(8 samples)" <<<"$out"
check "and stderr names the directory: $out" grep -q "not using the index cache in $work/out: the directory is writable by its group" <<<"$out"
check "once" test "$(grep -c "index cache" <<<"$out")" = 1
chmod g-w out
mv "$idx" forged
ln -s "$work/forged" "$idx"
cp forged forged.before
out=$(samples)
check "a symlink at the cache's name is not followed (8 samples): $out" grep -q "(8 samples)" <<<"$out"
check "and stderr says so" grep -q "not using the index cache $work/out/imagefolder-[0-9a-f]*\.idx: a symlink" <<<"$out"
age
check "a run that writes the cache" run
check "it replaced the symlink by a file of its own" test -f "$idx" -a ! -L "$idx"
check "and did not write through it" cmp -s forged forged.before
chown nobody "$idx"
check "a run over a cache of another user" run
check "replaced it by one of its own" test "$(stat -c %u "$idx")" = "$(id -u)"
finish
