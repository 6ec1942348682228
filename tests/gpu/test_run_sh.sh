#!/bin/bash
# tests/gpu/run.sh's counting, without a GPU: its test and bench stages run
# on stand-in programs (DLJOB_GPU_BUILD, shell scripts named as the real
# ones) that pass, fail or skip (exit 77) as told, and the real
# tests/bench/bench_gpu.sh.
#  - a section that exits 77 is skipped, not failed: the summary says
#    SKIPPED with its reason and ends "N passed, N failed, N skipped (...)";
#    all passed or skipped -> exit 0 (before: bench_gpu.sh's 77 was a
#    failure, exit 1);
#  - one failing section -> exit 1, the skips still counted as skips;
#  - nothing passed, everything skipped (no GPU visible) -> exit 77;
#  - the test stage needs no nvcc (only the build stage does);
#  - the fuse stage (tests/gpu/fuse_probe) alone needs no engine programs,
#    counts its 77 as a skip and a failure as one, and copies the probe's
#    SUMMARY lines into summary.txt.
set -u
src=${DLJOB_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dljob-run-sh.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }

b=$tmp/build
mkdir -p "$b"
# each stand-in exits with the code in $tmp/rc.<name> (test_cuda_ops:
# rc.test_cuda_ops.<section>; default 0)
for p in test_cuda_plan test_cuda_ops bench_gpu; do
	sec=""
	[ $p = test_cuda_ops ] && sec='.$2'
	cat >"$b/$p" <<SH
#!/bin/sh
f=$tmp/rc.$p$sec
rc=0; [ -f "\$f" ] && rc=\$(cat "\$f")
case \$rc in 77) echo "SKIP: no CUDA device" ;; 0) echo "$p \${2:-}: ok" ;; *) echo "$p \${2:-}: FAIL" ;; esac
exit \$rc
SH
	chmod +x "$b/$p"
done
# run.sh with the test and bench stages, no nvcc on PATH; prints its exit status
runsh() {
	rm -rf "$tmp/out"
	env PATH=/usr/bin:/bin CUDA_HOME=/nonexistent DLJOB_GPU_BUILD="$b" OUT="$tmp/out" STAGES="test bench" \
		SECTIONS="ops fp16 fp16resume" TORCH_PYTHON=/bin/true bash "$src/tests/gpu/run.sh" >"$tmp/log" 2>&1
	echo $?
}
last() { tail -1 "$tmp/out/summary.txt" 2>/dev/null; }

# 1. bench_gpu without a device (77), the sections pass
echo 77 >"$tmp/rc.bench_gpu"
rc=$(runsh)
if [ "$rc" = 0 ] && grep -q '^bench_gpu.sh: exit 77 SKIPPED' "$tmp/out/summary.txt" &&
	[ "$(last)" = "run.sh: 4 passed, 0 failed, 1 skipped (bench_gpu.sh: bench_gpu.sh: no CUDA device on this machine: nothing to measure)" ]; then
	ok "bench_gpu.sh's 77 is a skip: exit 0, $(last)"
else
	fail "bench skipped: exit $rc, $(last); $(cat "$tmp/log")"
fi

# 2. one section skipped, one failed
echo 77 >"$tmp/rc.test_cuda_ops.fp16"
echo 1 >"$tmp/rc.test_cuda_ops.fp16resume"
rc=$(runsh)
if [ "$rc" = 1 ] && grep -q '^test_cuda_ops fp16: SKIPPED (SKIP: no CUDA device)' "$tmp/out/summary.txt" &&
	grep -q '^    test_cuda_ops fp16resume: FAIL' "$tmp/out/summary.txt" &&
	[ "$(last)" = "run.sh: 2 passed, 1 failed, 2 skipped (test_cuda_ops fp16: SKIP: no CUDA device, bench_gpu.sh: bench_gpu.sh: no CUDA device on this machine: nothing to measure)" ]; then
	ok "a failure fails (exit 1), the skips stay skips: $(last)"
else
	fail "one failed: exit $rc, $(last); $(cat "$tmp/out/summary.txt")"
fi

# 3. no GPU visible: everything skips
for p in test_cuda_plan test_cuda_ops.ops test_cuda_ops.fp16 test_cuda_ops.fp16resume; do echo 77 >"$tmp/rc.$p"; done
rc=$(runsh)
if [ "$rc" = 77 ] && [ "$(last | cut -d'(' -f1)" = "run.sh: 0 passed, 0 failed, 5 skipped " ]; then
	ok "nothing passed, all skipped: exit 77"
else
	fail "all skipped: exit $rc, $(last)"
fi

# 4. STAGES=fuse, in a build folder that holds fuse_probe only
fb=$tmp/fusebuild
mkdir -p "$fb"
cat >"$fb/fuse_probe" <<SH
#!/bin/sh
rc=\$(cat "$tmp/rc.fuse_probe")
[ "\$rc" = 77 ] && echo "fuse_probe: no CUDA device is visible (stand-in)"
[ "\$rc" = 77 ] || echo "SUMMARY 1x1 conv bf16 supported check=ok"
exit \$rc
SH
chmod +x "$fb/fuse_probe"
runfuse() {
	rm -rf "$tmp/out"
	env PATH=/usr/bin:/bin CUDA_HOME=/nonexistent DLJOB_GPU_BUILD="$fb" OUT="$tmp/out" STAGES="fuse" \
		bash "$src/tests/gpu/run.sh" >"$tmp/log" 2>&1
	echo $?
}
echo 77 >"$tmp/rc.fuse_probe"
rc=$(runfuse)
if [ "$rc" = 77 ] && [ "$(last)" = "run.sh: 0 passed, 0 failed, 1 skipped (fuse_probe: fuse_probe: no CUDA device is visible (stand-in))" ] &&
	[ -s "$tmp/out/fuse_probe.log" ]; then
	ok "fuse stage without a GPU: exit 77, $(last)"
else
	fail "fuse skipped: exit $rc, $(last); $(cat "$tmp/log")"
fi
echo 0 >"$tmp/rc.fuse_probe"
rc=$(runfuse)
if [ "$rc" = 0 ] && grep -q '^    SUMMARY 1x1 conv bf16 supported check=ok$' "$tmp/out/summary.txt" &&
	[ "$(last)" = "run.sh: 1 passed, 0 failed, 0 skipped" ]; then
	ok "fuse stage passed, its SUMMARY lines in summary.txt"
else
	fail "fuse passed: exit $rc, $(last); $(cat "$tmp/log")"
fi
echo 1 >"$tmp/rc.fuse_probe"
rc=$(runfuse)
if [ "$rc" = 1 ] && [ "$(last)" = "run.sh: 0 passed, 1 failed, 0 skipped" ]; then
	ok "fuse stage failed: exit 1"
else
	fail "fuse failed: exit $rc, $(last); $(cat "$tmp/log")"
fi

[ "$fails" -eq 0 ] || { echo "$fails failed"; exit 1; }
echo "all passed"
