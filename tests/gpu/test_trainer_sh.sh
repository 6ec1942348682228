#!/bin/bash
# tests/gpu/trainer.sh's logic, without a GPU: its jpeg and resume parts run
# the real dljob on the cpu backend (BACKEND=cpu, a small convnet and folder),
# with a stand-in nvidia-smi on the PATH.  Each part must print its "ok" line
# (the JPEG folder is generated, trained on, measured; SIGTERM mid-run, a
# checkpoint, --resume, weights compared with two uninterrupted runs: on the
# cpu backend all three are bit-identical; the default --precision auto is
# fp32 there, in the log and the checkpoint).  And with no nvidia-smi at all the
# script skips (77).  About 20 s.
set -u
src=${DLJOB_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
bin=${DLJOB_BIN:?DLJOB_BIN not set}
py=${TORCH_PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dljob-trainer-sh.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin" "$tmp/nobin"
printf '#!/bin/sh\nexit 0\n' >"$tmp/bin/nvidia-smi"
chmod +x "$tmp/bin/nvidia-smi"
fails=0
"$py" -c 'import numpy, PIL' 2>/dev/null || { echo "FAIL: $py lacks numpy or PIL (python3-numpy, python3-pil)"; exit 1; }
env PATH="$tmp/bin:$PATH" OUT="$tmp/out" TMPDIR="$tmp" BACKEND=cpu JPEG_MODEL=convnet JPEG_PER_CLASS=8 \
	JPEG_BATCH=16 PARTS="jpeg resume auto" DLJOB_BIN="$bin" TORCH_PYTHON="$py" bash "$src/tests/gpu/trainer.sh"
rc=$?
for p in jpeg resume auto; do
	grep -q "^trainer $p: .*ok" "$tmp/out/trainer.txt" || { echo "FAIL: no ok line for $p"; fails=$((fails + 1)); }
done
[ $rc -eq 0 ] || { echo "FAIL: trainer.sh exited $rc"; fails=$((fails + 1)); }
grep -q "resumed 0.00e+00, second uninterrupted run 0.00e+00" "$tmp/out/trainer.txt" ||
	{ echo "FAIL: the cpu backend's resumed run is not bit-identical"; fails=$((fails + 1)); }
# no GPU: skipped, nothing run
env PATH="$tmp/nobin:/usr/bin:/bin" DLJOB_BIN="$bin" bash "$src/tests/gpu/trainer.sh" >"$tmp/skip.log" 2>&1
rc=$?
[ $rc -eq 77 ] || { echo "FAIL: without nvidia-smi trainer.sh exited $rc, want 77"; cat "$tmp/skip.log"; fails=$((fails + 1)); }
[ $fails -eq 0 ] && echo "test_trainer_sh: PASS"
exit $((fails > 0))
