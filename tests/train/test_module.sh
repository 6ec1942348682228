#!/bin/bash
# The CUDA backend is a module (engine/backend.h), so dljob starts on a CPU
# node without mapping any CUDA library (tests/bench/RESULTS.md, "Launch"):
#  - dljob has no NEEDED entry for a CUDA library (cudart, cuBLAS(Lt),
#    cuDNN, NCCL, ...);
#  - the module (CUDA builds) NEEDs them, exports exactly one symbol,
#    dljob_backend_vN, and is loaded and entered by --backend cuda;
#  - a missing module, one dlopen refuses (the file and dlerror() named) and
#    one without the entry symbol (another dljob version) each give one line
#    on stderr and a non-zero status, no crash;
#  - the module is found beside the executable (<bin>/../lib/dljob/);
#  - --backend auto on a node without the NVIDIA driver trains on cpu
#    without touching the module; with the driver (faked: root, a private
#    mount namespace) an unloadable module is an error naming --backend cpu,
#    and the real module without a usable GPU leaves cpu to train.
set -u
bin=${DLJOB_BIN:?run under make check}
build=${DLJOB_BUILDDIR:?run under make check}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dljob-module.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
cudalibs='lib(cuda|cudart|cublas|cublasLt|cudnn[a-z_]*|nccl|nvrtc|nvJitLink|cufft|curand|cusparse|cusolver|nvidia-ml)\.so'
have_cuda=no
grep -q '^#define DLJOB_HAVE_CUDA 1' "$build/config.h" && have_cuda=yes
run=(--model resnet20 --data synthetic:1,8,8,10,64 --batch 8 --steps 1 --eval 0 --print-every 1 --threads 1)

# ---- dljob links no CUDA library ----------------------------------------------------
needed=$(readelf -dW "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
[ -n "$needed" ] || fail "readelf -d $bin lists no NEEDED entry at all"
bad=$(grep -E "^$cudalibs" <<<"$needed")
[ -z "$bad" ] || fail "dljob has CUDA libraries in its NEEDED list:" $bad
echo "dljob NEEDED:" $needed

# ---- one line, non-zero status, no crash -----------------------------------------------
# expect_error NAME PATTERN ENV... -- dljob ARGS...
expect_error() {
	local name=$1 pat=$2 rc lines
	shift 2
	"$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	lines=$(wc -l <"$tmp/err")
	if [ $rc -eq 0 ] || [ $rc -ge 128 ]; then
		fail "$name: exit status $rc (want an error, not a crash)"
	elif [ "$lines" -ne 1 ]; then
		fail "$name: $lines lines on stderr (want one):"; cat "$tmp/err"
	elif ! grep -qE "$pat" "$tmp/err"; then
		fail "$name: stderr does not match /$pat/:"; cat "$tmp/err"
	else
		echo "ok   $name: $(cat "$tmp/err")"
	fi
}

mkdir -p "$tmp/none" "$tmp/garbage" "$tmp/other"
if [ $have_cuda = no ]; then
	expect_error "no CUDA in this build" "^dljob: --backend cuda: backend 'cuda' is not built into this dljob" \
		"$bin" --backend cuda "${run[@]}" --out "$tmp/o"
	[ $fails -eq 0 ] || exit 1
	echo "ok   built --without-cuda: dljob links no CUDA library, --backend cuda says it is not built"
	exit 0
fi

mod=$build/engine/cuda/.libs/dljob-cuda.so
[ -f "$mod" ] || { echo "FAIL: no module $mod"; exit 1; }
mneeded=$(readelf -dW "$mod" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
for l in cudart cudnn cublas nccl; do
	grep -qE "^lib$l\.so" <<<"$mneeded" || fail "the module does not NEED lib$l ($(echo $mneeded))"
done
exported=$(nm -D --defined-only "$mod" | awk '$2 ~ /^[TDRB]$/ {print $3}')
[ "$(echo $exported)" = "$(sed -n 's/^#define DL_BACKEND_ABI \([0-9]*\)$/dljob_backend_v\1/p' \
	"${DLJOB_SRCDIR:?}/engine/backend.h")" ] || fail "the module exports '$(echo $exported)', not dljob_backend_vN alone"

expect_error "missing module" "^dljob: --backend cuda: the CUDA backend module dljob-cuda.so is not installed \(looked for $tmp/none/dljob-cuda.so" \
	env DLJOB_MODULE_DIR="$tmp/none" "$bin" --backend cuda "${run[@]}" --out "$tmp/o"
echo "not an ELF file" >"$tmp/garbage/dljob-cuda.so"
expect_error "dlopen error" "^dljob: --backend cuda: cannot load the CUDA backend $tmp/garbage/dljob-cuda.so: .*(invalid ELF header|file too short)" \
	env DLJOB_MODULE_DIR="$tmp/garbage" "$bin" --backend cuda "${run[@]}" --out "$tmp/o"
# a real shared library without the entry point: what a module of another
# dljob version (another DL_BACKEND_ABI) looks like
libz=$(ldd "$bin" | sed -n 's/.*libz\.so\.1 => \(\/[^ ]*\) .*/\1/p')
cp "$libz" "$tmp/other/dljob-cuda.so" || fail "no libz to copy"
expect_error "module of another version" "^dljob: --backend cuda: $tmp/other/dljob-cuda.so is not a CUDA backend for this dljob: it has no dljob_backend_v[0-9]+ " \
	env DLJOB_MODULE_DIR="$tmp/other" "$bin" --backend cuda "${run[@]}" --out "$tmp/o"

# beside the executable: <bin>/../lib/dljob/dljob-cuda.so (a garbage one,
# so the error names the path it was found at)
mkdir -p "$tmp/tree/bin" "$tmp/tree/lib/dljob"
cp "$bin" "$tmp/tree/bin/dljob" && cp "$tmp/garbage/dljob-cuda.so" "$tmp/tree/lib/dljob/"
expect_error "found beside the executable" "cannot load the CUDA backend $tmp/tree/bin/../lib/dljob/dljob-cuda.so: " \
	env -u DLJOB_MODULE_DIR "$tmp/tree/bin/dljob" --backend cuda "${run[@]}" --out "$tmp/o"

# the real module is loaded and its backend entered: here without a GPU its
# create() says so; with a GPU it trains
env DLJOB_MODULE_DIR="$build/engine/cuda/.libs" "$bin" --backend cuda "${run[@]}" --out "$tmp/real" \
	>"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 0 ]; then
	echo "ok   the module trained on the GPU"
elif [ $rc -lt 128 ] && grep -q "cuda backend: no CUDA device is visible" "$tmp/err"; then
	echo "ok   the module was loaded and entered: $(head -1 "$tmp/err")"
else
	fail "--backend cuda with the built module: status $rc:"; cat "$tmp/err"
fi

# auto on a node without the NVIDIA driver: cpu, the module never opened
# (it is garbage here, so opening it would fail)
if [ -e /dev/nvidiactl ]; then
	echo "skip auto without a driver: this node has /dev/nvidiactl"
elif env DLJOB_MODULE_DIR="$tmp/garbage" "$bin" --backend auto "${run[@]}" --out "$tmp/auto" >"$tmp/out" 2>"$tmp/err" &&
	cat "$tmp/out" "$tmp/err" | grep -q "resnet20, .* cpu backend"; then
	echo "ok   --backend auto without /dev/nvidiactl trains on cpu and leaves the module alone"
else
	fail "--backend auto without a driver:"; cat "$tmp/out" "$tmp/err"
fi

# auto on a node with the driver, faked: /dev/nvidiactl made in an overlay
# of /dev in a private mount namespace (root; the host's /dev is untouched).
# A module that cannot be loaded is an error there, not a silent cpu run;
# the real module is loaded, finds no usable GPU and leaves cpu to train.
if [ -e /dev/nvidiactl ]; then
	echo "skip auto with a faked driver: this node has a real one"
elif [ "$(id -u)" != 0 ] || ! command -v unshare >/dev/null; then
	echo "skip auto with a faked driver: needs root and unshare(1)"
else
	mkdir -p "$tmp/ovl/u" "$tmp/ovl/w"
	with_driver() {
		unshare -m --propagation private bash -c 'mount -t overlay overlay -o "lowerdir=/dev,upperdir=$1,workdir=$2" /dev &&
			touch /dev/nvidiactl && shift 2 && exec "$@"' sh "$tmp/ovl/u" "$tmp/ovl/w" "$@"
	}
	expect_error "auto, driver present, module unloadable" "cannot load the CUDA backend $tmp/garbage/dljob-cuda.so: .*\(this node has the NVIDIA driver; --backend cpu trains without the GPU\)" \
		with_driver env DLJOB_MODULE_DIR="$tmp/garbage" "$bin" --backend auto "${run[@]}" --out "$tmp/o"
	if with_driver env DLJOB_MODULE_DIR="$build/engine/cuda/.libs" "$bin" --backend auto "${run[@]}" \
		--out "$tmp/auto2" >"$tmp/out" 2>"$tmp/err" && cat "$tmp/out" "$tmp/err" | grep -q "resnet20, .* cpu backend"; then
		echo "ok   auto, driver present but no usable GPU: the module is loaded and cpu trains"
	else
		fail "auto with a faked driver and the real module:"; cat "$tmp/out" "$tmp/err"
	fi
fi

[ $fails -eq 0 ] || exit 1
echo "ok   dljob links no CUDA library; the CUDA backend module loads on demand and fails in one line"
