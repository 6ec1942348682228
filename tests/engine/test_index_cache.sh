#!/bin/bash
# An ImageFolder's scan is cached next to the output (--out) and reused by the
# next run (a resume, a requeued job) while the tree is unchanged; a changed
# tree is scanned again.  A run refused by its checks writes nothing.
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
finish
