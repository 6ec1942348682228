#!/bin/bash
# One command for a GPU machine with CUDA (nvcc) and PyTorch but possibly no
# autotools, Slurm or oneDNN: builds the CUDA backend, the float64 "ref"
# backend and the model zoo straight from the source tree with nvcc/gcc,
# runs the GPU tests (tests/gpu/test_cuda_ops) and then the benchmark
# (tests/bench/bench_gpu.sh: dljob vs PyTorch).  Results go to $OUT if set
# (else ./gpu-results): build.log, test_cuda_ops.log, bench_gpu.log/.jsonl,
# env.txt.  cuDNN/NCCL/cuBLAS are taken from the CUDA toolkit, the system,
# or the nvidia-* wheels PyTorch ships with, whichever has them.
#   DLJOB_GPU_ARCH  nvcc -gencode flags (default sm_90, H100)
#   SKIP_BENCH=1    tests only
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-$PWD/gpu-results}
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
build=${DLJOB_GPU_BUILD:-$(mktemp -d /tmp/dljob-gpu.XXXXXX)}
mkdir -p "$build/obj" || exit 1
py=${TORCH_PYTHON:-python3}
arch=${DLJOB_GPU_ARCH:--gencode arch=compute_90,code=sm_90}
log() { echo "run.sh: $*" | tee -a "$out/build.log"; }
: >"$out/build.log"

# ---- toolchain and libraries ----------------------------------------------
cuda=${CUDA_HOME:-/usr/local/cuda}
nvcc=$(command -v nvcc || true)
[ -z "$nvcc" ] && [ -x "$cuda/bin/nvcc" ] && nvcc=$cuda/bin/nvcc
site=$("$py" -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null || true)
[ -z "$nvcc" ] && for s in $site; do [ -x "$s/nvidia/cuda_nvcc/bin/nvcc" ] && nvcc=$s/nvidia/cuda_nvcc/bin/nvcc; done
if [ -z "$nvcc" ]; then
	log "no nvcc (looked in PATH, $cuda/bin and the nvidia wheels): cannot build the kernels"
	exit 1
fi
cuda_root=$(cd "$(dirname "$nvcc")/.." && pwd)
dirs="$cuda_root $cuda /usr /usr/local"
for s in $site; do for d in "$s"/nvidia/*; do [ -d "$d" ] && dirs="$dirs $d"; done; done
incs="" libs="" rpaths=""
# find <header> <library stem>: add the include dir and the library file
find_dep() {
	local h=$1 l=$2 d inc="" lib=""
	for d in $dirs; do
		[ -z "$inc" ] && [ -f "$d/include/$h" ] && inc=$d/include
		if [ -z "$lib" ]; then
			for f in "$d"/lib64/lib$l.so "$d"/lib/lib$l.so "$d"/lib/x86_64-linux-gnu/lib$l.so \
				 "$d"/lib64/lib$l.so.[0-9]* "$d"/lib/lib$l.so.[0-9]*; do
				[ -e "$f" ] && { lib=$f; break; }
			done
		fi
	done
	if [ -z "$inc" ] || [ -z "$lib" ]; then
		log "missing $h or lib$l.so (searched: $dirs)"
		return 1
	fi
	log "$h in $inc, $lib"
	incs="$incs -I$inc"
	libs="$libs $lib"
	rpaths="$rpaths -Wl,-rpath,$(dirname "$lib")"
}
find_dep cuda_runtime_api.h cudart && find_dep cudnn.h cudnn && find_dep cublas_v2.h cublas &&
	find_dep cublasLt.h cublasLt && find_dep nccl.h nccl || exit 1
{
	echo "date: $(date -u)"; echo "nvcc: $("$nvcc" --version | tail -1)"
	nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
	"$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())' 2>&1
	echo "libs:$libs"
} >"$out/env.txt"
cat "$out/env.txt"

# ---- build --------------------------------------------------------------
cat >"$build/config.h" <<'H'
/* written by tests/gpu/run.sh for a build without configure */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#define DLJOB_HAVE_CUDA 1
H
cflags="-std=gnu11 -O2 -fopenmp -Wall -Wextra -Wno-unused-parameter -Wshadow -Wformat=2 -Wstrict-prototypes -Werror"
objs=""
fail=0
for f in "$src"/engine/cuda/*.cu; do
	o=$build/obj/$(basename "$f" .cu).cu.o
	log "nvcc $(basename "$f")"
	"$nvcc" $arch -O3 -std=c++17 -Xcompiler -Wall,-Wextra,-Werror,-fPIC -I"$build" -I"$src" $incs -c "$f" -o "$o" \
		>>"$out/build.log" 2>&1 || { log "FAILED: $f"; fail=1; }
	objs="$objs $o"
done
for f in "$src"/engine/cuda/*.c "$src"/engine/ref/*.c "$src"/engine/resnet.c; do
	o=$build/obj/$(basename "$(dirname "$f")")_$(basename "$f" .c).o
	log "cc $(basename "$f")"
	gcc $cflags -I"$build" -I"$src" $incs -c "$f" -o "$o" >>"$out/build.log" 2>&1 || { log "FAILED: $f"; fail=1; }
	objs="$objs $o"
done
for t in tests/gpu/test_cuda_ops tests/bench/bench_gpu; do
	log "cc+link $t"
	gcc $cflags -I"$build" -I"$src" $incs "$src/$t.c" $objs -o "$build/$(basename "$t")" $libs $rpaths \
		-lstdc++ -lm -lpthread -ldl >>"$out/build.log" 2>&1 || { log "FAILED: $t"; fail=1; }
done
if [ $fail != 0 ]; then
	tail -40 "$out/build.log"
	exit 1
fi

# ---- tests, then the benchmark ------------------------------------------------
rc=0
log "running test_cuda_ops"
"$build/test_cuda_ops" 2>&1 | tee "$out/test_cuda_ops.log"
trc=${PIPESTATUS[0]}
log "test_cuda_ops exit status $trc"
[ "$trc" = 0 ] || rc=1
if [ "${SKIP_BENCH:-0}" != 1 ]; then
	log "running bench_gpu.sh"
	OUT=$out DLJOB_BENCH_GPU_BIN=$build/bench_gpu TORCH_PYTHON=$py bash "$src/tests/bench/bench_gpu.sh" 2>&1 |
		tee "$out/bench_gpu.log"
	[ "${PIPESTATUS[0]}" = 0 ] || rc=1
fi
[ -z "${DLJOB_GPU_BUILD:-}" ] && rm -rf "$build"
exit $rc
