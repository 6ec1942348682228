#!/bin/bash
# One command for a GPU machine with CUDA (nvcc) and PyTorch but possibly no
# autotools, Slurm or oneDNN: builds the CUDA backend, the float64 "ref"
# backend and the model zoo straight from the source tree with nvcc/gcc,
# runs the GPU tests (tests/gpu/test_cuda_ops) and then the benchmark
# (tests/bench/bench_gpu.sh: dljob vs PyTorch).  Results go to $OUT if set
# (else ./gpu-results): build.log, test_cuda_ops.log, bench_gpu.log/.jsonl,
# env.txt.  cuDNN/NCCL/cuBLAS are taken from the CUDA toolkit, the system,
# or the nvidia-* wheels PyTorch ships with, whichever has them.
#   DLJOB_GPU_ARCH   nvcc -gencode flags (default sm_90, H100)
#   DLJOB_GPU_BUILD  build directory to keep and reuse (default: a temporary one)
#   REBUILD=1        rebuild even if DLJOB_GPU_BUILD holds the programs
#   SKIP_BENCH=1 / SKIP_TESTS=1   tests only / benchmark only
#   DLJOB_GPU_WERROR=1            warnings are errors
# Under a 10-minute limit per command, run it twice with the same
# DLJOB_GPU_BUILD: SKIP_BENCH=1 first, then SKIP_TESTS=1.
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
site=$("$py" -c 'import site; print(" ".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null || true)
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

# ---- build (in parallel; warnings are errors only with DLJOB_GPU_WERROR=1,
# since another compiler version must not stop the tests) -------------------
werror=""
[ "${DLJOB_GPU_WERROR:-0}" = 1 ] && werror="-Werror"
cat >"$build/config.h" <<'H'
/* written by tests/gpu/run.sh for a build without configure */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#define DLJOB_HAVE_CUDA 1
H
cflags="-std=gnu11 -O2 -fopenmp -Wall -Wextra -Wno-unused-parameter -Wshadow -Wformat=2 -Wstrict-prototypes $werror"
nvflags="$arch -O3 -std=c++17 -Xcompiler -Wall,-Wextra,-fPIC${werror:+,-Werror}"
if [ -x "$build/test_cuda_ops" ] && [ -x "$build/bench_gpu" ] && [ "${REBUILD:-0}" != 1 ]; then
	log "reusing the build in $build (REBUILD=1 to rebuild)"
else
	rm -f "$build"/obj/*
	objs=""
	for f in "$src"/engine/cuda/*.cu "$src"/engine/cuda/*.c "$src"/engine/ref/*.c "$src"/engine/resnet.c; do
		name=$(basename "$(dirname "$f")")_$(basename "$f")
		o=$build/obj/$name.o
		objs="$objs $o"
		case $f in
		*.cu) cmd="$nvcc $nvflags -I$build -I$src $incs -c $f -o $o" ;;
		*) cmd="gcc $cflags -I$build -I$src $incs -c $f -o $o" ;;
		esac
		( $cmd >"$build/obj/$name.log" 2>&1 || echo "FAILED: $f" >"$build/obj/$name.failed" ) &
		# at most 8 compilers at once
		while [ "$(jobs -rp | wc -l)" -ge 8 ]; do sleep 0.2; done
	done
	wait
	cat "$build"/obj/*.log >>"$out/build.log" 2>/dev/null
	if ls "$build"/obj/*.failed >/dev/null 2>&1; then
		cat "$build"/obj/*.failed | tee -a "$out/build.log"
		tail -40 "$out/build.log"
		exit 1
	fi
	for t in tests/gpu/test_cuda_ops tests/bench/bench_gpu; do
		log "cc+link $t"
		if ! gcc $cflags -I"$build" -I"$src" $incs "$src/$t.c" $objs -o "$build/$(basename "$t")" $libs $rpaths \
			-lstdc++ -lm -lpthread -ldl >>"$out/build.log" 2>&1; then
			log "FAILED: $t"
			tail -40 "$out/build.log"
			exit 1
		fi
	done
	log "built in $build"
fi

# ---- tests, then the benchmark ------------------------------------------------
rc=0
if [ "${SKIP_TESTS:-0}" != 1 ]; then
	log "running test_cuda_ops"
	"$build/test_cuda_ops" 2>&1 | tee "$out/test_cuda_ops.log"
	trc=${PIPESTATUS[0]}
	log "test_cuda_ops exit status $trc (77: no GPU visible)"
	[ "$trc" = 0 ] || rc=1
fi
if [ "${SKIP_BENCH:-0}" != 1 ]; then
	log "running bench_gpu.sh"
	OUT=$out DLJOB_BENCH_GPU_BIN=$build/bench_gpu TORCH_PYTHON=$py bash "$src/tests/bench/bench_gpu.sh" 2>&1 |
		tee "$out/bench_gpu.log"
	[ "${PIPESTATUS[0]}" = 0 ] || rc=1
fi
[ -z "${DLJOB_GPU_BUILD:-}" ] && rm -rf "$build"
exit $rc
