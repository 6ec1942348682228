#!/bin/bash
# --precision auto, the default of training and dljob eval (issue 37): on
# the cpu and ref backends it is fp32, said once on stderr, and what the
# checkpoint records and a resume compares is the resolved precision, never
# "auto"; two ranks agree on it; --help says what auto means.
set -u
bin=${DLJOB_BIN:?DLJOB_BIN not set}
py=${TORCH_PYTHON:-/usr/bin/python3}
. "$DLJOB_SRCDIR/tests/lib.sh"
in_workdir prec

syn=synthetic:1,8,8,4,64
common=(--model resnet20 --data $syn --batch 8 --eval 0 --print-every 1 --threads 1 --loader-threads 1)
# meta FILE: the precision a checkpoint's safetensors metadata records
meta() { head -c 65536 "$1" | grep -a -o '"precision":"[^"]*"' | head -n 1 | cut -d'"' -f4; }
# train NAME ARGS...: a run into NAME, stderr in NAME.log
train() {
	local out=$1; shift
	"$bin" "${common[@]}" --out "$out" "$@" >"$out.out" 2>"$out.log" || { fail "$out: $(cat "$out.log")"; return 1; }
}

# The default on the cpu backend: fp32, said once, recorded resolved.
if train def --backend cpu --steps 2; then
	n=$(grep -c -e "--precision auto" def.log)
	grep -qx "dljob: --precision auto: fp32 (the cpu backend)" def.log && [ "$n" = 1 ] &&
		ok "the default on the cpu backend resolves to fp32, said once" ||
		fail "default on cpu: $n auto lines: $(cat def.log)"
	grep -q "auto" def/metrics.jsonl && fail "metrics.jsonl names auto"
	[ "$(meta def/checkpoint.safetensors)" = fp32 ] && ok "its checkpoint records fp32" ||
		fail "the default run's checkpoint records '$(meta def/checkpoint.safetensors)'"
fi
# --backend auto on this node (no NVIDIA driver, or a build without CUDA
# here): cpu, fp32
if [ -e /dev/nvidiactl ]; then
	echo "skip --backend auto on cpu: this node has the NVIDIA driver (tests/gpu checks auto there)"
elif train bauto --backend auto --steps 1; then
	grep -qx "dljob: --precision auto: fp32 (the cpu backend)" bauto.log && ok "--backend auto: cpu, fp32" ||
		fail "--backend auto: $(cat bauto.log)"
fi

# --precision auto named explicitly, on the ref backend (fp32 only)
if train ref --backend ref --precision auto --steps 1; then
	grep -qx "dljob: --precision auto: fp32 (the ref backend)" ref.log && ok "--precision auto on ref: fp32" ||
		fail "--precision auto on ref: $(cat ref.log)"
	[ "$(meta ref/checkpoint.safetensors)" = fp32 ] || fail "ref checkpoint records '$(meta ref/checkpoint.safetensors)'"
fi

# A named precision is not announced.
if train named --backend cpu --precision fp32 --steps 1; then
	grep -q -e "--precision auto" named.log && fail "--precision fp32 said auto: $(cat named.log)" ||
		ok "--precision fp32 is not announced as auto"
fi

# Resuming compares the resolved precision: auto after an explicit fp32 run
# is no change; auto after a bf16 run on cpu is fp32, and says so.
if train named --backend cpu --steps 2 --resume; then
	grep -q "trained in" named.log && fail "auto after fp32 was taken for a change: $(cat named.log)" ||
		ok "resuming an fp32 checkpoint with auto (fp32) is no precision change"
fi
if train bf --backend cpu --precision bf16 --steps 1 && train bf --backend cpu --steps 2 --resume; then
	grep -q "the checkpoint's run trained in bf16 on the cpu backend, this one in fp32 on cpu" bf.log &&
		ok "resuming a bf16 checkpoint with auto on cpu: fp32, with the note" ||
		fail "auto after bf16: $(cat bf.log)"
	[ "$(meta bf/checkpoint.safetensors)" = fp32 ] || fail "resumed checkpoint records '$(meta bf/checkpoint.safetensors)'"
fi

# dljob eval: auto is its default too, and its JSON records the resolved one
if [ -f def/model.safetensors ]; then
	if "$bin" eval --model resnet20 --weights def/model.safetensors --data $syn --backend cpu --batch 8 \
		--threads 1 --json ev.json >ev.out 2>ev.log; then
		grep -qx "dljob eval: --precision auto: fp32 (the cpu backend)" ev.log &&
			grep -q '"precision": "fp32"' ev.json && ok "dljob eval: auto is fp32 on cpu, in its JSON" ||
			fail "dljob eval: $(cat ev.log) $(grep precision ev.json)"
	else
		fail "dljob eval: $(cat ev.log)"
	fi
fi

# Two ranks resolve auto together (a collective every rank joins).
port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
for r in 0 1; do
	env -u SLURM_JOB_ID -u SLURM_PROCID -u PMIX_RANK DLJOB_WORLD=tcp RANK=$r WORLD_SIZE=2 \
		MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
		"$bin" "${common[@]}" --backend cpu --steps 2 --timeout 60 --out ddp 2>"rank$r.log" >/dev/null &
	pids+=($!)
done
wait "${pids[0]}"; rc0=$?
wait "${pids[1]}"; rc1=$?
pids=()
if [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] && grep -qx "dljob: --precision auto: fp32 (the cpu backend)" rank0.log &&
	! grep -q -e "--precision auto" rank1.log && [ "$(meta ddp/checkpoint.safetensors)" = fp32 ]; then
	ok "two ranks: auto is fp32, said once by rank 0"
else
	fail "two ranks: rc $rc0/$rc1: $(cat rank0.log rank1.log)"
fi

# --help of training, eval and plan says what auto means.
"$bin" --help | grep -q "default auto: bf16 on a GPU with tensor" && "$bin" --help | grep -q "fp32 on the cpu" &&
	ok "--help explains auto" || fail "--help does not explain --precision auto"
"$bin" eval --help | grep -q "auto|fp32|bf16|fp16 (default auto" || fail "dljob eval --help does not name auto"
"$bin" plan --help | grep -q "auto|fp32|bf16|fp16 (default auto" || fail "dljob plan --help does not name auto"

finish
