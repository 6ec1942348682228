#!/bin/bash
# ResNet-50 training throughput on one GPU, dljob's CUDA backend vs PyTorch
# in the same run: 224x224, batch 256, bf16, synthetic data in GPU memory,
# median step time (CUDA events) of >= 20 steps after warm-up, and the
# fraction of the physical limit (24.5 GFLOP/img / measured bf16 matmul rate).
# Not part of make check.  Environment:
#   DLJOB_BENCH_GPU_BIN  the bench_gpu program (default: $DLJOB_BUILDDIR/tests/bench/bench_gpu)
#   TORCH_PYTHON         python with torch + torchvision (default: /usr/bin/python3)
#   BATCH SIZE STEPS WARMUP PRECISION   (256 224 30 10 bf16; fp16, fp32: TF32 off
#                        on both sides)
#   MODES                PyTorch's modes (default eager,compile)
#   OUT                  if set, results are also written to $OUT/bench_gpu.jsonl
# Without a CUDA device it stops at once, says so and exits 77 (bench_gpu's
# own code for it).
set -u
here=$(cd "$(dirname "$0")" && pwd)
bin=${DLJOB_BENCH_GPU_BIN:-${DLJOB_BUILDDIR:-.}/tests/bench/bench_gpu}
py=${TORCH_PYTHON:-/usr/bin/python3}
batch=${BATCH:-256} size=${SIZE:-224} steps=${STEPS:-30} warmup=${WARMUP:-10} prec=${PRECISION:-bf16}
res=$(mktemp)
trap 'rm -f "$res"' EXIT
if [ ! -x "$bin" ]; then
	echo "bench_gpu.sh: $bin is not built (configure with CUDA, make check; or tests/gpu/run.sh)" >&2
	exit 1
fi
args="--batch $batch --size $size --steps $steps --warmup $warmup --precision $prec"
rc=0
for graphs in 0 1; do
	"$bin" $args --graphs "$graphs" >>"$res"
	brc=$?
	if [ "$brc" -eq 77 ]; then
		echo "bench_gpu.sh: no CUDA device on this machine: nothing to measure" >&2
		exit 77
	elif [ "$brc" -ne 0 ]; then
		echo "{\"engine\": \"dljob\", \"cuda_graphs\": $graphs, \"error\": \"bench_gpu exited $brc\"}" >>"$res"
		rc=1
	fi
done
# torch loads its own cuDNN/NCCL wheels: a LD_LIBRARY_PATH meant for dljob
# (the bundle's env.sh) could hand it another cuDNN, which it refuses
env -u LD_LIBRARY_PATH "$py" "$here/bench_gpu.py" $args --modes "${MODES:-eager,compile}" >>"$res" || rc=1
cat "$res"
[ -n "${OUT:-}" ] && mkdir -p "$OUT" && cp "$res" "$OUT/bench_gpu.jsonl"
# one summary table with ratios against PyTorch eager
"$py" - "$res" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
ref = next((r for r in rows if r.get("engine") == "pytorch-eager" and "img_per_s" in r), None)
lim = next((r for r in rows if "matmul_bf16_tflops" in r), None)
print("%-16s %-7s %10s %10s %9s %9s" % ("engine", "graphs", "step ms", "img/s", "vs eager", "of limit"))
for r in rows:
    if "img_per_s" not in r:
        print("%-16s %s" % (r.get("engine"), r.get("error")))
        continue
    frac = r.get("fraction_of_limit")
    if frac is None and lim:
        frac = r["img_per_s"] * lim["gflop_per_img"] * 1e9 / (lim["matmul_bf16_tflops"] * 1e12)
    print("%-16s %-7s %10.2f %10.1f %9s %9s" % (r["engine"], r.get("cuda_graphs", "-"), r["step_ms_median"],
          r["img_per_s"], "%.2fx" % (r["img_per_s"] / ref["img_per_s"]) if ref else "-",
          "%.1f%%" % (100 * frac) if frac else "-"))
for r in rows:
    if "conv_math" in r:
        print("dljob graphs %s: convolution directions by cuDNN math type: %s" % (r.get("cuda_graphs", "-"),
              ", ".join("%s %d" % kv for kv in r["conv_math"].items() if kv[1])))
if lim:
    print("bf16 matmul: %.0f TFLOP/s -> limit %.0f img/s at %.1f GFLOP/img" % (lim["matmul_bf16_tflops"],
          lim["matmul_bf16_tflops"] * 1e12 / (lim["gflop_per_img"] * 1e9), lim["gflop_per_img"]))
PY
exit $rc
