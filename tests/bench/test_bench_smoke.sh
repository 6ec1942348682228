#!/bin/bash
# The by-hand benchmarks still start (tests/bench/*; their numbers are never
# checked here): each program once at its smallest setting, a few seconds in
# all, and the scripts' own refusals.
#   bench_engine   resnet20, batch 8, 1 step after 1 warm-up: its one line
#   bench_ops      batch 1, 1 rep: 10 shapes, each naming its algorithm
#                  (the 3x3 stride-1 ones Winograd, conv1 and the 3x3
#                  stride-2 ones direct but layer2.0's, own-wino where the
#                  CPU has AVX-512, and layer3.0's and layer4.0's with the
#                  gathered weight gradient, direct+col-dw), plus oneDNN's
#                  line after each own-wino one (layer2.0, layer3/4 only)
#                  and each wino+own-dw one (layer1/2 only)
#   bench_bn       1 rep: 9 shapes and the sum
#   bench_engine.sh / bench_data.sh given a directory with no Makefile: exit 2
#                  saying so (not make's "config.h: No such file")
#   bench_gpu      (CUDA build) --help: exit 2 with its usage, at once
#   bench_launch.sh's timing (bench_launch_lib.sh, no cluster): a run whose
#                  first step never came, or that exited non-zero, stops the
#                  benchmark (exit 1) naming the run and its kept log, not a
#                  "nan" in the table; a run that printed it is timed
#   on a CUDA build without a GPU (no /dev/nvidiactl), naming the missing
#   device, not with a traceback, a crash or "unknown backend":
#     bench_engine.sh BUILDDIR cuda  exit 1 (it loads the build's module);
#                        bench_engine cuda with no module at hand says so
#     bench_gpu.sh       exit 77
# Environment from make check: DLJOB_SRCDIR, DLJOB_BUILDDIR.
set -u
src=${DLJOB_SRCDIR:?} build=${DLJOB_BUILDDIR:?}
tmp=$(mktemp -d /tmp/dljob-bench-smoke.XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}
ok() { echo "ok: $*"; }

export OMP_NUM_THREADS=1
out=$("$build/tests/bench/bench_engine" cpu resnet20 1 28 28 10 8 1 1 2>&1)
if [ $? -eq 0 ] && grep -q '^engine cpu resnet20 8x1x28x28: median [0-9.]* img/s .* peak_rss_kib [0-9]*' <<<"$out"; then
	ok "bench_engine: $out"
else
	fail "bench_engine: $out"
fi

out=$("$build/tests/bench/bench_ops" 1 1 2>&1)
rc=$?
# Where the panel path takes layer3/layer4 (AVX-512, few threads), each has
# an own-wino line and oneDNN's winograd line after it; where the wgrad path
# takes layer1/layer2's weight gradient (AVX-512), a wino+own-dw line and
# oneDNN's winograd line after it; where the stride-2 path takes layer2.0
# (AVX-512 and enough tiles per thread, so not at batch 1 on a few
# threads), an own-wino line and oneDNN's direct line after it: 1 direct
# stride-2 3x3 line either way, and layer3.0's and layer4.0's with the
# gathered weight gradient (direct+col-dw).
own=$(grep -c ' k3 s1 own-wino  *fwd' <<<"$out")
dw=$(grep -c ' k3 s1 wino+own-dw  *fwd' <<<"$out")
s2=$(grep -c ' k3 s2 own-wino  *fwd' <<<"$out")
if [ $rc -eq 0 ] && [ "$(grep -c 'GFLOP/s' <<<"$out")" -eq $((10 + own + dw + s2)) ] &&
	grep -q '^conv1 7x7/2 .* k7 s2 direct  *fwd' <<<"$out" &&
	[ "$(grep -c ' k3 s1 winograd  *fwd' <<<"$out")" -eq 4 ] &&
	[ "$(grep -c ' k3 s2 direct  *fwd' <<<"$out")" -eq 1 ] &&
	[ "$(grep ' k3 s2 direct+col-dw  *fwd' <<<"$out" | grep -c '^layer[34].0 3x3/2 ')" -eq 2 ] &&
	[ "$(grep -c ' k3 s2 direct+col-dw  *fwd' <<<"$out")" -eq 2 ] &&
	[ "$(grep ' k3 s1 own-wino ' <<<"$out" | grep -vc '^layer[34] 3x3 ')" -eq 0 ] &&
	[ "$(grep ' k3 s2 own-wino ' <<<"$out" | grep -vc '^layer2.0 3x3/2 ')" -eq 0 ] &&
	[ "$(grep ' k3 s1 wino+own-dw ' <<<"$out" | grep -vc '^layer[12] 3x3 ')" -eq 0 ]; then
	ok "bench_ops: 10 shapes, the 3x3 stride-1 ones named winograd ($own also own-wino, $dw also wino+own-dw, $s2 stride-2 own-wino, layer3.0/4.0 direct+col-dw)"
else
	fail "bench_ops (exit $rc): $out"
fi

out=$("$build/tests/bench/bench_bn" 1 2>&1)
rc=$?
if [ $rc -eq 0 ] && [ "$(grep -cE '^(r50|r20) ' <<<"$out")" -eq 9 ] && grep -q '^sum ' <<<"$out"; then
	ok "bench_bn: 9 shapes and the sum"
else
	fail "bench_bn (exit $rc): $out"
fi

for s in bench_engine bench_data; do
	out=$(cd "$tmp" && bash "$src/tests/bench/$s.sh" "$tmp" 2>&1)
	rc=$?
	if [ $rc -eq 2 ] && grep -q "^$s.sh: no Makefile in '$tmp'" <<<"$out"; then
		ok "$s.sh without a build directory: exit 2, says so"
	else
		fail "$s.sh given $tmp (no Makefile): exit $rc: $out"
	fi
done

# bench_launch.sh's record(): the logs as its runs leave them
lib=$(cd "$src" && pwd)/tests/bench/bench_launch_lib.sh
printf 'dljob: resnet20 ...\nstep 1/1 loss 2.3 wall=105.25\n' >"$tmp/good.log"
printf 'dljob: cannot open /usr/share/datasets/fashion-mnist: No such file wall=101.5\n' >"$tmp/bad.log"
out=$(cd "$tmp" && bash -c '. "$1"; declare -A R; record step.none.2 "dljob first step --mpi=none -n2" "$2" "^step 1/" 100 0
	record step.none.2 "dljob first step --mpi=none -n2" "$2" "^step 1/" 104.25 0; echo "R=${R[step.none.2]}"' \
	_ "$lib" "$tmp/good.log" 2>&1)
if [ $? -eq 0 ] && [ "$out" = "R=5.25 1.00 " ]; then
	ok "bench_launch_lib record: a first step is timed ($out)"
else
	fail "bench_launch_lib record on a good log: $out"
fi
for case in "bad.log 0 no line matching '^step 1/' in its output" "good.log 3 exit status 3"; do
	read -r log rc why <<<"$case"
	mkdir -p "$tmp/kept"
	out=$(cd "$tmp" && BENCH_LOG_DIR=$tmp/kept bash -c '. "$1"; declare -A R
		record step.none.2 "dljob first step --mpi=none -n2" "$2" "^step 1/" 100 "$3"; echo "R=${R[step.none.2]}"' \
		_ "$lib" "$tmp/$log" "$rc" 2>&1)
	brc=$?
	kept=$(sed -n 's/.*; its log: \(.*\)$/\1/p' <<<"$out" | head -1)
	if [ $brc -eq 1 ] && grep -qF "bench_launch.sh: dljob first step --mpi=none -n2 failed: $why; its log: $tmp/kept/" <<<"$out" &&
		! grep -q "^R=\|nan" <<<"$out" && cmp -s "$kept" "$tmp/$log"; then
		ok "bench_launch_lib record: $why -> exit 1, names the run and the kept log"
	else
		fail "bench_launch_lib record ($why): exit $brc: $out"
	fi
	rm -rf "$tmp/kept"
done

if [ ! -x "$build/tests/bench/bench_gpu" ]; then
	echo "note: no CUDA build here, bench_gpu and bench_gpu.sh not checked"
else
	# a lone option is refused before any GPU is touched (it used to be
	# dropped: --help ran the whole benchmark)
	out=$(timeout 60 "$build/tests/bench/bench_gpu" --help 2>&1)
	rc=$?
	if [ $rc -eq 2 ] && grep -q '^usage: bench_gpu' <<<"$out"; then
		ok "bench_gpu --help: exit 2, usage"
	else
		fail "bench_gpu --help: exit $rc: $out"
	fi
	if [ -e /dev/nvidiactl ]; then
		echo "note: a GPU driver is here, the no-GPU refusals not checked"
	else
		# the script loads the build's module by itself
		out=$(env -u DLJOB_MODULE_DIR BENCH_STEPS=1 BENCH_PRECISIONS=fp32 timeout 120 \
			bash "$src/tests/bench/bench_engine.sh" "$build" cuda 2>&1)
		rc=$?
		if [ $rc -eq 1 ] && grep -q '^bench_engine: cuda backend: no CUDA device' <<<"$out"; then
			ok "bench_engine.sh BUILDDIR cuda without a GPU: exit 1, names the missing device"
		else
			fail "bench_engine.sh BUILDDIR cuda without a GPU: exit $rc: $out"
		fi
		# the program alone, no module to be found: why, not "unknown backend"
		out=$(env -u DLJOB_MODULE_DIR timeout 60 "$build/tests/bench/bench_engine" cuda resnet20 1 28 28 10 8 1 1 2>&1)
		rc=$?
		if [ $rc -eq 1 ] && grep -q '^bench_engine: .*\(dljob-cuda.so\|no CUDA device\)' <<<"$out"; then
			ok "bench_engine cuda, no module given: exit 1, says why"
		else
			fail "bench_engine cuda, no module given: exit $rc: $out"
		fi
		out=$(DLJOB_BUILDDIR=$build BATCH=1 SIZE=32 STEPS=1 WARMUP=1 timeout 120 \
			bash "$src/tests/bench/bench_gpu.sh" 2>&1)
		rc=$?
		if [ $rc -eq 77 ] && grep -q '^bench_gpu.sh: no CUDA device' <<<"$out" && ! grep -q Traceback <<<"$out"; then
			ok "bench_gpu.sh without a GPU: exit 77, names the missing device"
		else
			fail "bench_gpu.sh without a GPU: exit $rc: $out"
		fi
	fi
fi

[ "$fails" -eq 0 ] || { echo "$fails failed"; exit 1; }
echo "all passed"
