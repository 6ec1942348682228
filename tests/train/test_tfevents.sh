#!/bin/bash
# TensorBoard event files: a short run writes OUT/events.out.tfevents.*, read
# back by an independent reader: protoc's Python output of engine/tfevent.proto
# (Debian's protobuf-compiler and python3-protobuf) and a CRC-32C written here
# from the polynomial.  Every record's framing (length, masked CRC-32C of the
# length, data, masked CRC-32C of the data) must hold; the first event is the
# file version; then one Event per metrics.jsonl record with the same step and
# the same scalars.  The reader must also catch a flipped byte (so it can fail).
# A run stopped at step 70 and resumed writes a second file that starts with a
# SessionLog START at step 71 (TensorBoard then drops older events of the
# steps it repeats); the two files together hold every record.
# The run's plot OUT/metrics.png is a 1600x1000 PNG with the line drawn.
. "$DLJOB_SRCDIR/tests/lib.sh"
FMNIST=/usr/share/datasets/fashion-mnist
need_file "$FMNIST/train-images-idx3-ubyte.gz" "Debian package dataset-fashion-mnist"
need_file "$DLJOB_BIN" "build dljob first"
command -v protoc >/dev/null || { echo "FAIL - protoc missing (Debian package protobuf-compiler)"; exit 1; }
py=${TORCH_PYTHON:-/usr/bin/python3}
work=$(mktemp -d "${TMPDIR:-/tmp}/dljob-tfevents.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1

"$py" "$DLJOB_SRCDIR/tests/fmnist_subset.py" "$FMNIST" fm 2048 256 || { fail "fixture"; finish; }
train=(--model convnet --data fashion-mnist:fm --epochs 2 --batch 32 --lr 0.4 --print-every 8
       --threads 1 --loader-threads 1)
"$DLJOB_BIN" "${train[@]}" --out run >run.log 2>&1
check "2-epoch convnet run exits 0" test $? -eq 0
n_ev=$(ls run/events.out.tfevents.* 2>/dev/null | wc -l)
check "one event file in --out ($n_ev)" test "$n_ev" -eq 1
protoc --proto_path="$DLJOB_SRCDIR/engine" --python_out=. "$DLJOB_SRCDIR/engine/tfevent.proto"
check "protoc --python_out of engine/tfevent.proto" test -s tfevent_pb2.py

cat >reader.py <<'PY'
import json, math, struct, sys, time
import tfevent_pb2

def crc32c(data):
    # reflected Castagnoli polynomial, table built here
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    crc = 0xFFFFFFFF
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF

assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value

def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF

def records(raw):
    off = 0
    while off < len(raw):
        head = raw[off:off + 12]
        assert len(head) == 12, "torn header at %d" % off
        n, = struct.unpack("<Q", head[:8])
        assert struct.unpack("<I", head[8:])[0] == masked(head[:8]), "length CRC at %d" % off
        data = raw[off + 12:off + 12 + n]
        tail = raw[off + 12 + n:off + 16 + n]
        assert len(data) == n and len(tail) == 4, "torn record at %d" % off
        assert struct.unpack("<I", tail)[0] == masked(data), "data CRC at %d" % off
        ev = tfevent_pb2.Event()
        ev.ParseFromString(data)
        yield ev
        off += 16 + n

if sys.argv[1] == "frame-only":
    list(records(open(sys.argv[2], "rb").read()))
    sys.exit(0)
metrics = [json.loads(l) for l in open(sys.argv[1])]
evs = []
for i, path in enumerate(sys.argv[2:]):
    events = list(records(open(path, "rb").read()))
    assert events[0].WhichOneof("what") == "file_version" and events[0].file_version == "brain.Event:2", events[0]
    if i > 0:  # a resumed run's file: START right after the step it resumed from
        e = events[1]
        assert e.WhichOneof("what") == "session_log" and e.session_log.status == tfevent_pb2.SessionLog.START, e
        assert e.step == evs[-1].step + 1, (e.step, evs[-1].step)
        events = events[1:]
    evs += events[1:]
assert len(evs) == len(metrics), (len(evs), len(metrics))
now = time.time()
tags = {"train/loss": ("loss", 1e-5, 0), "train/lr": ("lr", 1e-5, 0), "train/img_per_s": ("img_per_s", 1e-6, 0.051),
        "time/loader_stall_s": ("loader_stall_s", 1e-6, 6e-5), "time/compute_s": ("compute_s", 1e-6, 6e-5),
        "time/comm_s": ("comm_s", 1e-6, 6e-5), "time/exposed_comm_s": ("exposed_comm_s", 1e-6, 6e-5),
        "eval/top1": ("top1", 1e-6, 6e-5), "eval/top5": ("top5", 1e-6, 6e-5), "eval/loss": ("eval_loss", 1e-5, 0)}
last_wall = 0
n_eval = 0
for ev, m in zip(evs, metrics):
    assert ev.WhichOneof("what") == "summary", ev
    assert ev.step == m["step"], (ev.step, m["step"])
    assert abs(ev.wall_time - now) < 3600 and ev.wall_time >= last_wall, ev.wall_time
    last_wall = ev.wall_time
    got = {v.tag: v.simple_value for v in ev.summary.value}
    want = {t: k for t, (k, _, _) in tags.items() if k in m}
    assert set(got) == set(want), (sorted(got), sorted(want))
    n_eval += "eval/top1" in got
    for t, v in got.items():
        k, rel, ab = tags[t]
        assert abs(v - m[k]) <= rel * abs(m[k]) + ab + 1e-7 * abs(m[k]), (t, v, m[k])
assert n_eval == 2, n_eval
print("%d file(s), %d events, %d with eval, steps %d..%d" % (len(sys.argv) - 2, len(evs), n_eval, evs[0].step,
                                                            evs[-1].step))
PY
ev=$(ls run/events.out.tfevents.* 2>/dev/null | head -1)
out=$("$py" reader.py run/metrics.jsonl "$ev" 2>&1)
check "independent reader: framing, CRCs, steps and scalars match metrics.jsonl ($out)" test $? -eq 0

# Stopped at step 70 (epoch 2 of 64-step epochs), then resumed to the end.
"$DLJOB_BIN" "${train[@]}" --steps 70 --out res >res1.log 2>&1
check "run stopped at step 70 exits 0" test $? -eq 0
"$DLJOB_BIN" "${train[@]}" --resume --out res >res2.log 2>&1
check "resumed run exits 0" test $? -eq 0
mapfile -t evs < <(ls -tr res/events.out.tfevents.*)
out=$("$py" reader.py res/metrics.jsonl "${evs[@]}" 2>&1)
rc=$?
check "resumed: ${#evs[@]} files, START at step 71, records all there ($out)" eval '[ ${#evs[@]} -eq 2 ] && [ $rc -eq 0 ]'

# A flipped byte in the last record's data must be caught.
cp "$ev" bad.tfevents
size=$(stat -c %s bad.tfevents)
printf '\xff' | dd of=bad.tfevents bs=1 seek=$((size - 10)) conv=notrunc status=none
"$py" reader.py frame-only bad.tfevents >bad.out 2>&1
check "the reader catches a corrupted record ($(tail -1 bad.out))" grep -q "CRC" bad.out

# The run's plot.
res=$("$py" - run/metrics.png <<'PY'
import sys
from PIL import Image
im = Image.open(sys.argv[1]).convert("RGB")
assert im.size == (1600, 1000), im.size
blue = sum(1 for p in im.getdata() if p == (31, 119, 180))
assert blue > 500, blue  # the first series' colour, lines and markers
print("1600x1000, %d px of the series colour" % blue)
PY
)
check "run/metrics.png drawn ($res)" test $? -eq 0
[ "$_failed" -eq 0 ] || cat run.log
finish
