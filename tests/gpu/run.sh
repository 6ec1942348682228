#!/bin/bash
# The CUDA backend on a GPU machine that has CUDA (nvcc) and PyTorch but no
# autotools, Slurm or oneDNN (the lent H100/H200 machines): builds the CUDA
# backend, the float64 "ref" backend and the model zoo straight from the
# source tree with nvcc/gcc, runs the GPU tests section by section and then
# the benchmark.  Run from anywhere; results go to $OUT if set (else
# ./gpu-results): build.log, env.txt, plan.log, test_<section>.log,
# bench_gpu.log/.jsonl, summary.txt.  cuDNN/NCCL/cuBLAS are taken from the
# CUDA toolkit, the system, or the nvidia-* wheels PyTorch ships with.
#
# Stages (STAGES, default "build test"): each finishes well inside a
# 10-minute command limit; every test section runs as its own process under
# `timeout`, its output line-buffered into its log, so a hang or a kill
# loses nothing.  The NCCL timeout section runs last.
#   build   compile into DLJOB_GPU_BUILD (default /tmp/dljob-gpu; reused when
#           it holds the programs, REBUILD=1 to rebuild)       ~1-2 min
#   test    test_cuda_plan, then test_cuda_ops per section     ~3-5 min
#   sanitize  compute-sanitizer memcheck on the small sections (SANITIZE_SECTIONS)
#   bench   tests/bench/bench_gpu.sh: resnet50 b256 bf16, graphs off/on, vs PyTorch
#   fuse    tests/gpu/fuse_probe (not by default): cuDNN's fused BN convolution
#           graphs, supported or not, checked, timed against the legacy calls
#           (issue 37, tests/gpu/README); log fuse_probe.log, FUSE_ARGS its
#           options, FUSE_TIMEOUT seconds (default 420).  STAGES="build fuse"
#           compiles fuse_probe alone (seconds), not the engine.
# Environment:
#   SECTIONS          test_cuda_ops sections to run (default: all, timeout last)
#   SECTION_TIMEOUT   seconds per section (default 240)
#   SEED              seed for test_cuda_ops (default: the time)
#   DLJOB_GPU_ARCH    nvcc -gencode flags (default sm_90: H100/H200)
#   DLJOB_GPU_WERROR=1  warnings are errors (as --enable-werror)
# A program that exits 77 (skip: no GPU visible, or bench_gpu.sh without a
# device) counts as skipped, not failed; summary.txt ends with one line
# "run.sh: N passed, N failed, N skipped (what)".
# Exit status: 1 if anything failed; else 77 if nothing passed and something
# was skipped (no GPU visible); else 0.
# tests/gpu/test_run_sh.sh (make check) runs the test and bench stages on
# stand-in programs, without a GPU.
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-$PWD/gpu-results}
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
build=${DLJOB_GPU_BUILD:-/tmp/dljob-gpu}
mkdir -p "$build/obj" || exit 1
py=${TORCH_PYTHON:-python3}
arch=${DLJOB_GPU_ARCH:--gencode arch=compute_90,code=sm_90}
stages=${STAGES:-build test}
log() { echo "run.sh: $*" | tee -a "$out/build.log"; }
summary() { echo "$*" | tee -a "$out/summary.txt"; }
has_stage() { case " $stages " in *" $1 "*) return 0 ;; esac; return 1; }
need_engine() { has_stage test || has_stage sanitize || has_stage bench; }

# ---- toolchain and libraries ----------------------------------------------
cuda=${CUDA_HOME:-/usr/local/cuda}
nvcc=$(command -v nvcc || true)
[ -z "$nvcc" ] && [ -x "$cuda/bin/nvcc" ] && nvcc=$cuda/bin/nvcc
site=$("$py" -c 'import site; print(" ".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null || true)
[ -z "$nvcc" ] && for s in $site; do [ -x "$s/nvidia/cuda_nvcc/bin/nvcc" ] && nvcc=$s/nvidia/cuda_nvcc/bin/nvcc; done
if [ -z "$nvcc" ] && has_stage build; then
	log "no nvcc (looked in PATH, $cuda/bin and the nvidia wheels): cannot build the kernels"
	exit 1
fi
cuda_root=$cuda
[ -n "$nvcc" ] && cuda_root=$(cd "$(dirname "$nvcc")/.." && pwd)
dirs="$cuda_root $cuda /usr /usr/local"
for s in $site; do for d in "$s"/nvidia/* "$s"/nvidia/*/*; do [ -d "$d/include" ] && dirs="$dirs $d"; done; done
incs="" libs="" rpaths=""
# find <header> <library stem>: add the include dir and the library file,
# both from the first directory that has both (a header of one version with
# the library of another is what a mixed search found on the H200 machine:
# cuDNN 9.19's header from the wheel, 9.14's library from /usr/lib)
find_dep() {
	local h=$1 l=$2 d f inc="" lib=""
	for d in $dirs; do
		[ -f "$d/include/$h" ] || continue
		for f in "$d"/lib64/lib$l.so "$d"/lib/lib$l.so "$d"/lib/x86_64-linux-gnu/lib$l.so \
			 "$d"/lib64/lib$l.so.[0-9]* "$d"/lib/lib$l.so.[0-9]* "$d"/lib/x86_64-linux-gnu/lib$l.so.[0-9]*; do
			[ -e "$f" ] && { inc=$d/include lib=$f; break; }
		done
		[ -n "$lib" ] && break
	done
	if [ -z "$inc" ] || [ -z "$lib" ]; then
		log "missing $h or lib$l.so (searched: $dirs)"
		return 1
	fi
	log "$h in $inc, $lib"
	case " $incs " in *" -I$inc "*) ;; *) incs="$incs -I$inc" ;; esac
	libs="$libs $lib"
	rpaths="$rpaths -Wl,-rpath,$(dirname "$lib")"
}

if has_stage build; then
	: >"$out/build.log"
	find_dep cuda_runtime_api.h cudart && find_dep cudnn.h cudnn && find_dep cublas_v2.h cublas &&
		find_dep cublasLt.h cublasLt && find_dep nccl.h nccl || exit 1
	echo "$incs" >"$build/incs"
	echo "$libs $rpaths" >"$build/libs"
	werror=""
	[ "${DLJOB_GPU_WERROR:-0}" = 1 ] && werror="-Werror"
	cat >"$build/config.h" <<'H'
/* written by tests/gpu/run.sh for a build without configure */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#define DLJOB_HAVE_CUDA 1
/* engine/backend.c's last place for the CUDA module (unused here: the
 * programs link the backend) */
#define DLJOB_PKGLIBDIR "/nonexistent"
H
	cflags="-std=gnu11 -O2 -fopenmp -Wall -Wextra -Wno-unused-parameter -Wshadow -Wformat=2 -Wstrict-prototypes $werror"
	nvflags="$arch -O3 -std=c++17 ${werror:+-Werror all-warnings,default-stream-launch} -Xcompiler -Wall,-Wextra,-fPIC${werror:+,-Werror}"
	# fuse_probe: cuDNN and cudart only
	fp_libs=""
	for l in $libs; do case $l in */libcudnn.*|*/libcudart.*) fp_libs="$fp_libs $l" ;; esac; done
	log "cc+link tests/gpu/fuse_probe"
	gcc $cflags -I"$build" $incs "$src/tests/gpu/fuse_probe.c" -o "$build/fuse_probe" $fp_libs $rpaths -lm \
		>>"$out/build.log" 2>&1 || log "FAILED: tests/gpu/fuse_probe (the fuse stage will fail)"
	if ! need_engine; then
		log "no stage needs the engine's programs: not building them"
	elif [ -x "$build/test_cuda_ops" ] && [ -x "$build/bench_gpu" ] && [ -x "$build/test_cuda_plan" ] &&
		[ "${REBUILD:-0}" != 1 ]; then
		log "reusing the build in $build (REBUILD=1 to rebuild)"
	else
		rm -f "$build"/obj/* "$build"/libdlgpu.a
		# the engine without oneDNN (engine/cpu) and the data loaders: an
		# archive, so each program pulls only what it needs.  backend.c's
		# table names the cpu backend, which is not built here.
		for f in "$src"/engine/cuda/*.cu "$src"/engine/cuda/*.c "$src"/engine/ref/*.c "$src"/engine/*.c; do
			name=$(basename "$(dirname "$f")")_$(basename "$f")
			o=$build/obj/$name.o
			extra=""
			case $f in */engine/backend.c) extra="-Ddl_backend_cpu=dl_backend_ref" ;; esac
			case $f in
			*.cu) cmd="$nvcc $nvflags -I$build -I$src $incs -c $f -o $o" ;;
			*) cmd="gcc $cflags $extra -I$build -I$src $incs -c $f -o $o" ;;
			esac
			( $cmd >"$build/obj/$name.log" 2>&1 || echo "FAILED: $f" >"$build/obj/$name.failed" ) &
			while [ "$(jobs -rp | wc -l)" -ge 12 ]; do sleep 0.2; done
		done
		wait
		cat "$build"/obj/*.log >>"$out/build.log" 2>/dev/null
		# a file outside engine/cuda and engine/ref that does not compile here
		# matters only if a program needs it (the link says so)
		for f in "$build"/obj/*.failed; do
			[ -e "$f" ] || continue
			case $f in
			*/cuda_*|*/ref_*) cat "$f" | tee -a "$out/build.log"; tail -40 "$out/build.log"; exit 1 ;;
			*) log "note: $(cat "$f") (not needed unless a link fails)" ;;
			esac
		done
		ar rcs "$build/libdlgpu.a" "$build"/obj/*.o || exit 1
		for t in tests/gpu/test_cuda_plan tests/gpu/test_cuda_ops tests/bench/bench_gpu; do
			log "cc+link $t"
			if ! gcc $cflags -I"$build" -I"$src" $incs "$src/$t.c" "$build/libdlgpu.a" -o "$build/$(basename "$t")" \
				$libs $rpaths -lstdc++ -lm -lpthread -ldl >>"$out/build.log" 2>&1; then
				log "FAILED: $t"
				tail -40 "$out/build.log"
				exit 1
			fi
		done
		log "built in $build"
	fi
	{
		echo "date: $(date -u)"
		echo "nvcc: $("$nvcc" --version | tail -1)"
		nvidia-smi --query-gpu=name,driver_version,memory.total,pci.bus_id --format=csv,noheader 2>&1
		env -u LD_LIBRARY_PATH "$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())' 2>&1
		echo "libs: $(cat "$build/libs")"
		ldd "$build/$(need_engine && echo test_cuda_ops || echo fuse_probe)" | grep -E 'cudnn|nccl|cublas|cudart'
	} >"$out/env.txt" 2>&1
	cat "$out/env.txt"
fi

for p in test_cuda_plan test_cuda_ops bench_gpu; do
	need_engine || break
	if [ ! -x "$build/$p" ]; then
		log "$build/$p is not built (run with STAGES=build first)"
		exit 1
	fi
done

# Counts for the last summary line; each result is one of these.
: >"$out/summary.txt"
passed=0 failed=0 skipped=0 skipped_what=""
# result NAME RC [REASON]: RC 0 passed, 77 skipped (REASON), else failed.
result() {
	case $2 in
	0) passed=$((passed + 1)) ;;
	77) skipped=$((skipped + 1)) skipped_what="$skipped_what${skipped_what:+, }$1${3:+: $3}" ;;
	*) failed=$((failed + 1)) ;;
	esac
}
# what a skipped program said last (its reason)
why() { grep -v '^$' "$1" 2>/dev/null | tail -1 | cut -c1-120; }

if has_stage test; then
	timeout 120 "$build/test_cuda_plan" >"$out/plan.log" 2>&1
	prc=$?
	summary "test_cuda_plan: exit $prc$([ "$prc" = 77 ] && echo ' SKIPPED') ($(tail -1 "$out/plan.log"))"
	result test_cuda_plan "$prc" "$(why "$out/plan.log")"
	seed=${SEED:-$(date +%s)}
	all="ops convmath optim u8 normalize state fp16 fp16growth fp16resume nonfinite options resnet50 train nccl2 timeout"
	for s in ${SECTIONS:-$all}; do
		# line-buffered by the program itself (setvbuf), so a kill keeps every finished line
		timeout -k 10 "${SECTION_TIMEOUT:-240}" "$build/test_cuda_ops" "$seed" "$s" >"$out/test_$s.log" 2>&1
		trc=$?
		if [ "$trc" = 77 ]; then
			summary "test_cuda_ops $s: SKIPPED ($(why "$out/test_$s.log"))"
		else
			summary "test_cuda_ops $s (seed $seed): exit $trc$([ "$trc" = 124 ] && echo ' TIMEOUT')"
			grep -E 'FAIL|: ok$' "$out/test_$s.log" | sed 's/^/    /' | tee -a "$out/summary.txt" >/dev/null
		fi
		result "test_cuda_ops $s" "$trc" "$(why "$out/test_$s.log")"
	done
fi
if has_stage sanitize; then
	cs=$(command -v compute-sanitizer || ls "$cuda_root"/bin/compute-sanitizer 2>/dev/null || true)
	if [ -z "$cs" ]; then
		summary "compute-sanitizer: not found"
		result compute-sanitizer 77 "not found"
	else
		# --report-api-errors no: `ops` makes a cudaMalloc fail on purpose
		# (the fail_find hook: a cudnnFind out of memory), which memcheck
		# would count as an error; the backend checks every API call itself
		for s in ${SANITIZE_SECTIONS:-ops state fp16}; do
			timeout -k 10 "${SECTION_TIMEOUT:-240}" "$cs" --tool memcheck --report-api-errors no --error-exitcode 9 \
				"$build/test_cuda_ops" \
				"${SEED:-1}" "$s" >"$out/sanitize_$s.log" 2>&1
			src_rc=$?
			summary "compute-sanitizer memcheck $s: exit $src_rc ($(grep -E 'ERROR SUMMARY' "$out/sanitize_$s.log" | tail -1))"
			result "memcheck $s" "$src_rc" "$(why "$out/sanitize_$s.log")"
		done
	fi
fi
if has_stage bench; then
	log "running bench_gpu.sh"
	OUT=$out DLJOB_BENCH_GPU_BIN=$build/bench_gpu TORCH_PYTHON=$py bash "$src/tests/bench/bench_gpu.sh" 2>&1 |
		tee "$out/bench_gpu.log"
	brc=${PIPESTATUS[0]}
	summary "bench_gpu.sh: exit $brc$([ "$brc" = 77 ] && echo ' SKIPPED')"
	result bench_gpu.sh "$brc" "$(why "$out/bench_gpu.log")"
fi
if has_stage fuse; then
	if [ ! -x "$build/fuse_probe" ]; then
		summary "fuse_probe: not built (see build.log)"
		result fuse_probe 1
	else
		log "running fuse_probe ${FUSE_ARGS:-}"
		# OUT= : the probe's own log copy is not wanted here, tee writes it
		# shellcheck disable=SC2086
		OUT= timeout -k 10 "${FUSE_TIMEOUT:-420}" "$build/fuse_probe" ${FUSE_ARGS:-} 2>&1 | tee "$out/fuse_probe.log"
		frc=${PIPESTATUS[0]}
		summary "fuse_probe: exit $frc$([ "$frc" = 77 ] && echo ' SKIPPED')$([ "$frc" = 124 ] && echo ' TIMEOUT')"
		grep '^SUMMARY' "$out/fuse_probe.log" | sed 's/^/    /' >>"$out/summary.txt"
		result fuse_probe "$frc" "$(why "$out/fuse_probe.log")"
	fi
fi
summary "run.sh: $passed passed, $failed failed, $skipped skipped${skipped_what:+ ($skipped_what)}"
if [ "$failed" -gt 0 ]; then
	exit 1
elif [ "$passed" = 0 ] && [ "$skipped" -gt 0 ]; then
	exit 77
fi
exit 0
