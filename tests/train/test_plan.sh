#!/bin/bash
# dljob plan: the parts add up to peak_bytes, a hand-computed case (the
# same convnet plan engine/test/test_memplan.c derives), the fused layout
# below the plain one, and every bad invocation exits 2 with one line
# naming the problem.
set -u
bin=${DLJOB_BIN:?DLJOB_BIN not set}
work=$(mktemp -d "${TMPDIR:-/tmp}/dljob-plan.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

field() { awk -v k="$1" '$1 == k { print $2 }' out; }

# convnet 1x8x8, batch 2, bf16, no cuDNN workspace: activations 48128
# (2048 for the padded image throughout + 46080 live at conv3's backward)
if "$bin" plan --model convnet --batch 2 --image 1x8x8 --classes 10 --precision bf16 --workspace 0 >out 2>err; then
	cat out
	sum=$(( $(field weights) + $(field gradients) + $(field optimizer) + $(field activations) + $(field workspace) + $(field io) ))
	[ "$sum" = "$(field peak_bytes)" ] || fail "parts add to $sum, peak_bytes $(field peak_bytes)"
	[ "$(field activations)" = 48128 ] || fail "convnet activations $(field activations), want 48128"
	[ "$(field peak_bytes)" = "$(field live_peak_bytes)" ] || fail "convnet plan above its live peak"
else
	fail "dljob plan convnet: $(cat err)"
fi

# resnet50 b256 bf16: planned below the unshared layout (the 27.5 GiB one)
if "$bin" plan --model resnet50 --batch 256 --precision bf16 >out 2>err; then
	cat out
	[ "$(field peak_bytes)" -lt "$(field unshared_bytes)" ] || fail "resnet50 shares nothing"
	[ "$(field peak_bytes)" -ge "$(field live_peak_bytes)" ] || fail "resnet50 below its live peak"
else
	fail "dljob plan resnet50: $(cat err)"
fi

# --precision auto, the default: bf16, what training picks on a GPU with
# bf16 tensor cores; the plan says so and equals --precision bf16's
args=(--model resnet20 --batch 32 --workspace 0)
if "$bin" plan "${args[@]}" --precision bf16 >bf16 2>err && "$bin" plan "${args[@]}" >def 2>>err &&
	"$bin" plan "${args[@]}" --precision auto >auto 2>>err && "$bin" plan "${args[@]}" --precision fp32 >fp32 2>>err; then
	head -n 1 def | grep -q " precision bf16 backend cuda " || fail "the default plan is not bf16: $(head -n 1 def)"
	cmp -s def bf16 || fail "the default plan differs from --precision bf16's"
	cmp -s auto bf16 || fail "--precision auto's plan differs from --precision bf16's"
	head -n 1 fp32 | grep -q " precision fp32 " || fail "--precision fp32 plans $(head -n 1 fp32)"
	[ "$(awk '$1 == "peak_bytes" { print $2 }' fp32)" -gt "$(awk '$1 == "peak_bytes" { print $2 }' bf16)" ] ||
		fail "fp32 plans no more than bf16"
	echo "ok: the default and --precision auto plan bf16 on cuda; fp32 plans more"
else
	fail "dljob plan resnet20 in several precisions: $(cat err)"
fi

# the fused layout (BN+ReLU in the next conv's prologue) is smaller than
# the plain one for resnet50 b256 bf16, and the checker (run inside
# dlc_arena_plan: a plan it rejects is an error) accepts it
plain=$("$bin" plan --model resnet50 --batch 256 --precision bf16 --layout plain | awk '$1 == "peak_bytes" { print $2 }')
if "$bin" plan --model resnet50 --batch 256 --precision bf16 --layout fused >out 2>err; then
	cat out
	[ "$(field layout)" = fused ] || fail "resnet50 fused: layout $(field layout)"
	[ -n "$plain" ] && [ "$(field peak_bytes)" -lt "$plain" ] ||
		fail "resnet50 fused plan $(field peak_bytes) not below the plain $plain"
	[ "$(field peak_bytes)" -ge "$(field live_peak_bytes)" ] || fail "resnet50 fused below its live peak"
else
	fail "dljob plan resnet50 --layout fused: $(cat err)"
fi

expect() {
	local want=$1 pat=$2; shift 2
	"$bin" plan "$@" >out 2>err
	local rc=$?
	if [ "$rc" -ne "$want" ] || [ "$(wc -l <err)" -ne 1 ] || ! grep -q -e "$pat" err || [ -s out ]; then
		fail "dljob plan $*: rc=$rc (want $want): $(cat err)"
	else
		echo "ok: dljob plan $* -> $rc: $(cat err)"
	fi
}
expect 2 "does not allocate from a plan" --model resnet50 --batch 8 --backend cpu
expect 2 "expected cuda or cpu"           --model resnet50 --batch 8 --backend tpu
expect 2 "unknown (known:"                --model resnet99 --batch 8
expect 2 "are required"                   --model resnet50
expect 2 "batch"                          --model resnet50 --batch 0
expect 2 "expected auto, fp32, bf16 or fp16" --model resnet50 --batch 8 --precision fp8
expect 2 "expected CxHxW"                 --model resnet50 --batch 8 --image 3x224
expect 2 "unexpected argument"            --model resnet50 --batch 8 extra
expect 2 "unknown option '--nope' (see dljob plan --help)" --model resnet50 --batch 8 --nope
expect 2 "option '--batch' needs a value" --model resnet50 --batch
expect 2 "--workspace: 99999999999999 is out of range" --model resnet50 --batch 8 --workspace 99999999999999
expect 2 "expected plain or fused"        --model resnet50 --batch 8 --layout tight
[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all dljob plan checks passed"
