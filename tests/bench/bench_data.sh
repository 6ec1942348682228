#!/bin/bash
# Data pipeline throughput, run by hand (not part of make check):
#   tests/bench/bench_data.sh [BUILDDIR] [N_IMAGES] [SECONDS]
# The ImageNet training transform (decode + RandomResizedCrop(224) + flip +
# normalize to float CHW) on N ImageNet-sized JPEGs (~500x375, q90, cut from
# the photos Debian ships with python3-skimage / python3-sklearn by
# bench_data_fixture.py), through the dljob loader from the ImageFolder and
# from packed shards, against torchvision + PIL on the same files in the
# same run; 1 worker (per core) and all cores.
# Reports wall img/s and img per CPU-second: on a shared machine the latter
# is the honest per-core figure.  "no loader" is dl_image_sample in a loop;
# "next_ref" takes batches in place instead of copying them out; "u8" rows
# stop before normalization and give uint8 NHWC (what the CUDA trainer feeds
# its GPU: normalized there), dl_image_sample_u8 / dl_loader_next_u8_ref.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-${DLJOB_BUILDDIR:-$PWD}}
n=${2:-600}
secs=${3:-10}
py=${TORCH_PYTHON:-/usr/bin/python3}
tool=$build/engine/data/test/dataset_tool
pack=$build/engine/data/test/pack_tool
if ! [ -x "$tool" ] || ! [ -x "$pack" ]; then
	[ -f "$build/Makefile" ] || { echo "bench_data.sh: no Makefile in '$build': name the build directory, e.g. tests/bench/bench_data.sh _build" >&2; exit 2; }
	make -C "$build" engine/data/test/dataset_tool engine/data/test/pack_tool >/dev/null
fi
tmp=$(mktemp -d /tmp/dljob-bench-data.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc) # nproc alone answers OMP_NUM_THREADS

"$py" "$here/bench_data_fixture.py" "$tmp/folder" "$n"
"$pack" "$tmp/folder" "$tmp/shards" --shard-size 64 2>/dev/null
echo "# $n JPEGs, $(du -sh "$tmp/folder/train" | cut -f1), ${secs}s per run, $cores cores, $(date -u +%Y-%m-%dT%H:%MZ)"
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-36s %10s %12s\n' "pipeline" "img/s" "img/cpu-s"
row() { printf '%-36s %10s %12s\n' "$1" "$(echo "$2" | awk '{print $2}')" "$(echo "$2" | awk '{print $4}')"; }
row "dljob decode+transform, no loader" "$("$tool" transform 224 "$secs" $(ls "$tmp"/folder/train/*/* | head -200))"
row "dljob decode+transform u8, no loader" "$("$tool" transform8 224 "$secs" $(ls "$tmp"/folder/train/*/* | head -200))"
row "dljob folder, 1 worker" "$("$tool" bench "$tmp/folder" 224 1 32 "$secs")"
row "dljob shards, 1 worker" "$("$tool" bench "$tmp/shards" 224 1 32 "$secs")"
row "dljob shards, 1 worker, next_ref" "$("$tool" bench "$tmp/shards" 224 1 32 "$secs" ref)"
row "dljob shards, 1 worker, u8" "$("$tool" bench "$tmp/shards" 224 1 32 "$secs" u8)"
row "torchvision+PIL, 1 process" "$("$py" "$here/bench_data_torch.py" "$tmp/folder" "$secs" 0)"
row "dljob folder, $cores workers" "$("$tool" bench "$tmp/folder" 224 "$cores" 32 "$secs")"
row "dljob shards, $cores workers" "$("$tool" bench "$tmp/shards" 224 "$cores" 32 "$secs")"
row "dljob shards, $cores workers, u8" "$("$tool" bench "$tmp/shards" 224 "$cores" 32 "$secs" u8)"
row "torchvision+PIL, $cores workers" "$("$py" "$here/bench_data_torch.py" "$tmp/folder" "$secs" "$cores")"
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
