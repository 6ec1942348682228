#!/bin/bash
# Resuming with another configuration than the checkpoint's run (a requeued
# job on another allocation, a --resume by hand): what keeps the data
# position, the step count and the schedule meaningful goes on, with a note
# saying what changed; the rest is refused before training, in one line that
# names what changed and what to do (doc/training.md "Outputs, preemption, exit
# status", dljob(1) --resume).
#  - --seed: the checkpoint's seed shuffles the data (before: the loader took
#    --seed while a line said the checkpoint's was used), so the weights are
#    those of an uninterrupted run, bit for bit.
#  - another rank count with --batch keeping the global batch: goes on, and
#    the next checkpoint records the new ranks x batch; another global batch:
#    refused with the --batch to use, or the rank counts that divide it.
#  - --epochs: more (or fewer, but not before the position) goes on with the
#    schedule computed anew; fewer than the position is refused.
#  - data with more samples (synthetic, or an ImageFolder with a file added):
#    refused, naming the split sizes (before: resumed silently at a position
#    in another permutation).
#  - other data of the same sizes (an ImageFolder's class or file renamed):
#    refused, naming the class names or the list of samples (before: resumed
#    on them silently); a checkpoint without the fingerprints resumes with a
#    note.
#  - --lr, --precision, --backend: go on, with a note.
#  - a checkpoint without the keys added later: resumes, saying what is not
#    checked; on data too small for its position, refused.
#  - fp16's loss scale: a cpu checkpoint has none; a cuda fp16 one resumes
#    on cpu and the next checkpoint drops it.
. "$DLJOB_SRCDIR/tests/lib.sh"
need_file "$DLJOB_BIN"
bin=$DLJOB_BIN
py=${TORCH_PYTHON:-/usr/bin/python3}
in_workdir rchange

# 64 training samples: 4 steps per epoch at global batch 16.
data=synthetic:1,16,16,4,64
args=(--model resnet20 --backend cpu --epochs 2 --lr 0.2 --seed 3 --threads 1 --loader-threads 1 --eval 0
      --print-every 1 --timeout 60)

# runn N OUT ARGS...: N ranks (TCP rendezvous, as test_train_ddp.sh), all
# ranks' stderr in log; returns 0 when every rank exits 0, 1 when every rank
# exits 1, else 2.
runn() {
	local n=$1 out=$2 r rc=0 ones=0 port
	shift 2
	if [ "$n" = 1 ]; then
		env -u SLURM_JOB_ID -u SLURM_PROCID -u SLURM_RESTART_COUNT "$bin" "${args[@]}" --out "$out" "$@" 2>log
		return $?
	fi
	port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	pids=()
	for r in $(seq 0 $((n - 1))); do
		env -u SLURM_JOB_ID -u SLURM_PROCID -u PMIX_RANK -u SLURM_RESTART_COUNT DLJOB_WORLD=tcp RANK="$r" \
			WORLD_SIZE="$n" MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
			"$bin" "${args[@]}" --out "$out" "$@" 2>"rank$r.log" &
		pids+=($!)
	done
	for r in "${pids[@]}"; do
		wait "$r"
		case $? in 0) ;; 1) ones=$((ones + 1)) ;; *) rc=2 ;; esac
	done
	pids=()
	# Every rank checks the checkpoint; whichever refuses first says why in
	# full, the others repeat it shortened: the whole reason is in some log.
	cat rank*.log >log
	[ $rc = 2 ] && return 2
	[ $ones = 0 ] && return 0
	[ $ones = "$n" ] && return 1
	return 2
}
# refused DESC TEXT CMD...: CMD exits 1 and log holds TEXT.
refused() {
	local d=$1 text=$2 rc
	shift 2
	"$@"
	rc=$?
	if [ $rc = 1 ] && grep -qF -- "$text" log; then ok "$d"; else fail "$d (exit $rc): $(cat log)"; fi
}
# goes DESC TEXT CMD...: CMD exits 0 and log holds TEXT.
goes() {
	local d=$1 text=$2 rc
	shift 2
	"$@"
	rc=$?
	if [ $rc = 0 ] && grep -qF -- "$text" log; then ok "$d"; else fail "$d (exit $rc): $(cat log)"; fi
}
# meta FILE KEY: a checkpoint's metadata value.
meta() {
	"$py" - "$1" "$2" <<'EOF'
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    n, = struct.unpack("<Q", f.read(8))
    print(json.loads(f.read(n))["__metadata__"].get(sys.argv[2], ""))
EOF
}
# fresh NAME: a copy of checkpoint directory ck_NAME.
fresh() { rm -rf "$1" && cp -r "ck_$1" "$1"; }

# --- the seed: an uninterrupted run against one resumed with another --seed
runn 1 full --data "$data" --batch 16 --steps 6 || fail "uninterrupted run: $(cat log)"
runn 1 part --data "$data" --batch 16 --steps 3 || fail "first part: $(cat log)"
goes "--seed 9 on resume: the checkpoint's seed is used" "resuming with the checkpoint's seed 3" \
	runn 1 part --data "$data" --batch 16 --steps 6 --resume --seed 9
check "resumed with another --seed: weights bit for bit those of the uninterrupted run" \
	cmp -s full/model.safetensors part/model.safetensors
# ... while in a fresh run --seed does order the data: from the same --init
# weights, two seeds end apart
runn 1 s3 --data "$data" --batch 16 --steps 2 --init full/model.safetensors || fail "--init run: $(cat log)"
runn 1 s9 --data "$data" --batch 16 --steps 2 --init full/model.safetensors --seed 9 || fail "--init run: $(cat log)"
check "a fresh run's --seed orders its data" test -s s3/model.safetensors -a -s s9/model.safetensors
cmp -s s3/model.safetensors s9/model.safetensors && fail "--seed 3 and 9 from the same weights: the same result"

# --- rank counts: a checkpoint of 2 ranks x 8 at step 3
runn 2 two --data "$data" --batch 8 --steps 3 || fail "2-rank run: $(cat log)"
cp -r two ck_two
check "the checkpoint records ranks and batch" test "$(meta two/checkpoint.safetensors ranks)x$(meta two/checkpoint.safetensors batch)" = 2x8
goes "2 ranks x 8 -> 1 rank x 16 (same global batch) goes on" "this one has 1 x 16: the same global batch 16" \
	runn 1 two --data "$data" --batch 16 --steps 6 --resume
check "... to step 6, recording 1 rank x 16" \
	test "$(meta two/checkpoint.safetensors step) $(meta two/checkpoint.safetensors ranks)x$(meta two/checkpoint.safetensors batch)" = "6 1x16"
fresh two
refused "2 x 8 -> 1 x 8: refused with the --batch to use" \
	"2 ranks x --batch 8 = global batch 16, this run is 1 rank x --batch 8 = 8: a resumed run keeps the global batch" \
	runn 1 two --data "$data" --batch 8 --steps 6 --resume
grep -qF "resume on 1 rank with --batch 16" log || fail "no '--batch 16' advice: $(cat log)"
refused "2 x 8 -> 3 x 8: refused, 16 does not split over 3" "3 ranks cannot share 16 samples evenly" \
	runn 3 two --data "$data" --batch 8 --steps 6 --resume
runn 1 one --data "$data" --batch 16 --steps 3 || fail "1-rank run: $(cat log)"
goes "1 rank x 16 -> 2 ranks x 8 goes on" "this one has 2 x 8: the same global batch 16" \
	runn 2 one --data "$data" --batch 8 --steps 6 --resume

# --- epochs: a checkpoint in the second epoch (step 6 = epoch 2, batch 2)
runn 1 ep --data "$data" --batch 16 --steps 6 || fail "epoch run: $(cat log)"
cp -r ep ck_ep
goes "--epochs 2 -> 3 extends the run" "--epochs 2 -> 3: the learning-rate schedule is computed anew" \
	runn 1 ep --data "$data" --batch 16 --epochs 3 --resume
check "... to 3 epochs of 4 steps" test "$(meta ep/checkpoint.safetensors step)" = 12
fresh ep
refused "--epochs 1 is before the checkpoint's position" "past --epochs 1: give --epochs 2 or more" \
	runn 1 ep --data "$data" --batch 16 --epochs 1 --resume
goes "--lr changed: a note with the learning rates" "--lr 0.2 -> 0.1: the learning-rate schedule is computed anew" \
	runn 1 ep --data "$data" --batch 16 --lr 0.1 --steps 7 --resume
fresh ep
goes "--backend ref: a note" "this one in fp32 on ref" \
	runn 1 ep --data "$data" --batch 16 --backend ref --steps 7 --resume

# --- a checkpoint of a dljob before ranks, data and schedule were recorded
fresh ep
"$py" - ep/checkpoint.safetensors <<'EOF' || fail "cannot strip the metadata"
import json, struct, sys
p = sys.argv[1]
b = open(p, "rb").read()
n, = struct.unpack("<Q", b[:8])
h = json.loads(b[8:8 + n])
for k in ["ranks", "batch", "num_classes", "train_samples", "eval_samples", "lr", "warmup_epochs", "schedule",
          "precision", "backend"]:
    del h["__metadata__"][k]
hb = json.dumps(h, separators=(",", ":")).encode()
hb += b" " * (-len(hb) % 8)
open(p, "wb").write(struct.pack("<Q", len(hb)) + hb + b[8 + n:])
EOF
cp ep/checkpoint.safetensors old.safetensors
goes "an older checkpoint resumes, with a note on what is not checked" "only model, global batch and epochs are checked" \
	runn 1 ep --data "$data" --batch 16 --steps 7 --resume=old.safetensors
refused "an older checkpoint on data too small for its position: refused" \
	"the checkpoint is 2 batches into epoch 2, but an epoch of --data synthetic:1,16,16,4,16 has 1 batches of 16" \
	runn 1 ep --data synthetic:1,16,16,4,16 --batch 16 --resume=old.safetensors

# --- fp16's loss scale (cuda only): a cpu checkpoint has none; one that has
# it (as a cuda fp16 run writes it) resumes on cpu, which ignores it, and
# the checkpoint it writes has none again (the cpu backend's state_out says
# "no scale", so a stale one is not carried along)
fresh ep
check "a cpu checkpoint has no loss_scale" test -z "$(meta ep/checkpoint.safetensors loss_scale)"
"$py" - ep/checkpoint.safetensors <<'EOF' || fail "cannot add the loss scale"
import json, struct, sys
p = sys.argv[1]
b = open(p, "rb").read()
n, = struct.unpack("<Q", b[:8])
h = json.loads(b[8:8 + n])
h["__metadata__"].update(loss_scale="2048", loss_scale_good="17", precision="fp16", backend="cuda")
hb = json.dumps(h, separators=(",", ":")).encode()
hb += b" " * (-len(hb) % 8)
open(p, "wb").write(struct.pack("<Q", len(hb)) + hb + b[8 + n:])
EOF
goes "a cuda fp16 checkpoint (with its loss scale) resumes on cpu" "this one in fp32 on cpu" \
	runn 1 ep --data "$data" --batch 16 --steps 7 --resume
check "... and its next checkpoint has no loss scale" \
	test "$(meta ep/checkpoint.safetensors step)/$(meta ep/checkpoint.safetensors loss_scale)" = 7/

# --- the data changed
fresh ep
refused "more synthetic samples: refused" \
	"was written on data of 64 training and 2 held-out samples in 4 classes, --data now has 80, 3 and 4" \
	runn 1 ep --data synthetic:1,16,16,4,80 --batch 16 --resume
"$py" "$DLJOB_SRCDIR/tests/tiny_imagefolder.py" imgs 4 20 || fail "cannot write the ImageFolder"
runn 1 img --data "$work/imgs" --image-size 16 --batch 4 --steps 1 || fail "ImageFolder run: $(cat log)"
"$py" -c 'from PIL import Image; Image.new("RGB", (32, 32)).save("imgs/train/red/9.png")'
refused "ImageFolder with a file added since: refused" "8 training and 8 held-out samples in 2 classes, --data now has 9, 8 and 2" \
	runn 1 img --data "$work/imgs" --image-size 16 --batch 4 --steps 2 --resume
rm imgs/train/red/9.png
# other data of the same sizes (before: resumed on them silently)
mv imgs/train/red imgs/train/ruby && mv imgs/val/red imgs/val/ruby
refused "ImageFolder with a class renamed (same sizes): refused" \
	"of the same size (8 training and 8 held-out samples in 2 classes): the class names differ" \
	runn 1 img --data "$work/imgs" --image-size 16 --batch 4 --steps 2 --resume
mv imgs/train/ruby imgs/train/red && mv imgs/val/ruby imgs/val/red
first=$(cd imgs/train/red && ls | head -1)
mv "imgs/train/red/$first" "imgs/train/red/x$first"
refused "ImageFolder with a file renamed (same sizes): refused" \
	"the list of samples differs (other files or file names" \
	runn 1 img --data "$work/imgs" --image-size 16 --batch 4 --steps 2 --resume
grep -qF -- "start a new run from its weights with --init" log || fail "no --init advice: $(cat log)"
mv "imgs/train/red/x$first" "imgs/train/red/$first"
# a checkpoint from before the fingerprints: resumes, saying they are not checked
cp img/checkpoint.safetensors img-old.safetensors
"$py" - img-old.safetensors <<'EOF' || fail "cannot strip the fingerprints"
import json, struct, sys
p = sys.argv[1]
b = open(p, "rb").read()
n, = struct.unpack("<Q", b[:8])
h = json.loads(b[8:8 + n])
assert len(h["__metadata__"].pop("data_classes")) == 16 and len(h["__metadata__"].pop("data_samples")) == 16
hb = json.dumps(h, separators=(",", ":")).encode()
hb += b" " * (-len(hb) % 8)
open(p, "wb").write(struct.pack("<Q", len(hb)) + hb + b[8 + n:])
EOF
mv imgs/train/red imgs/train/ruby && mv imgs/val/red imgs/val/ruby
goes "a checkpoint without fingerprints resumes on renamed classes, with a note" \
	"did not record its data's fingerprint: only the data's sizes are checked" \
	runn 1 img2 --data "$work/imgs" --image-size 16 --batch 4 --steps 2 --resume=img-old.safetensors
mv imgs/train/ruby imgs/train/red && mv imgs/val/ruby imgs/val/red
goes "... and with the file removed again it goes on" "resumed from" \
	runn 1 img --data "$work/imgs" --image-size 16 --batch 4 --steps 2 --resume
finish
