#!/bin/bash
# One call of the device tool (tests/gpu/README): build from gpu-bundle/,
# run tests/gpu/run.sh's stages, then an optional extra command, and bring
# every log back in the 8 files $OUT allows: summary.txt and logs.tgz.
#   run(command="STAGES='build test bench' bash tests/gpu/device-call.sh [EXTRA]",
#       carry=["gpu-bundle", <ignored folder with data>])
# Environment: STAGES, SECTIONS, SECTION_TIMEOUT (run.sh's), LIMIT (seconds
# for the build and run.sh, default 500), LIMIT2 (for EXTRA, default 200),
# DLJOB_CUDA_ROOTS (default /usr/local/cuda: cuDNN and NCCL then come from
# PyTorch's wheels, the versions torch itself uses).  EXTRA runs after
# `. /tmp/dljob-bundle/env.sh`, in the checkout, with OUT set to the log
# folder (so tests/gpu/trainer.sh's files are packed too).
set -u
out_real=${OUT:?OUT not set (the device tool sets it)}
o=/tmp/dljob-call; rm -rf "$o"; mkdir -p "$o" || exit 1
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv >"$o/smi.txt" 2>&1
export OUT=$o PYTHONUNBUFFERED=1 SECTION_TIMEOUT=${SECTION_TIMEOUT:-150}
export DLJOB_CUDA_ROOTS=${DLJOB_CUDA_ROOTS-/usr/local/cuda}
timeout -k 5 "${LIMIT:-500}" bash gpu-bundle/bundle-build.sh --run
rc=$?
echo "device-call: bundle-build --run exit $rc after $(($(date +%s) - t0)) s" | tee -a "$o/summary.txt"
if [ $# -gt 0 ]; then
	# shellcheck disable=SC1091
	. /tmp/dljob-bundle/env.sh
	timeout -k 5 "${LIMIT2:-200}" bash -c "$*" 2>&1 | tee "$o/extra.log"
	erc=${PIPESTATUS[0]}
	echo "device-call: extra exit $erc after $(($(date +%s) - t0)) s" | tee -a "$o/summary.txt"
	[ "$erc" = 0 ] || rc=1
fi
cp "$o/summary.txt" "$out_real/" 2>/dev/null
tar czf "$out_real/logs.tgz" -C "$(dirname "$o")" "$(basename "$o")"
exit $rc
