#!/bin/bash
# --out failing under a running training, as a real file system fails: an
# ext4 file system (a 64 MiB image on a loop device, in a private mount
# namespace) that
#  EIO   is shut down mid-run (FS_IOC_SHUTDOWN, as when its disk goes away):
#        every write then fails with EIO;
#  EROFS meets an error with errors=remount-ro (ext4's trigger_fs_error):
#        the kernel makes it read-only under the run, writes fail with EROFS.
# (A plain `mount -o remount,ro` is refused while the run holds its logs open
# for writing, so these are the ways a running job meets a read-only or
# failing --out.)  Each time the run must stop with exit status 1 and one line
# naming the file and the cause; once the file system is mounted again,
# --resume must continue from the last checkpoint and `dljob report` read the
# whole log.  The full disk is tests/train/test_out_full.sh.
. "$DLJOB_SRCDIR/tests/lib.sh"
need_file "$DLJOB_BIN" "build dljob first"
[ "$(id -u)" -eq 0 ] || { echo "FAIL - needs root (mount -o loop in unshare -m)"; exit 1; }
command -v mkfs.ext4 >/dev/null || { echo "FAIL - needs mkfs.ext4 (e2fsprogs)"; exit 1; }
if [ -z "${DLJOB_OUT_EIO_NS:-}" ]; then
	exec env DLJOB_OUT_EIO_NS=1 unshare -m --propagation private bash "$0" "$@"
fi
bin=$DLJOB_BIN
py=${TORCH_PYTHON:-/usr/bin/python3}
work=$(mktemp -d "${TMPDIR:-/tmp}/dljob-outeio.XXXXXX") || exit 1
pid=
# the loop device goes with the last unmount (mount -o loop sets autoclear)
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; umount "$work/m" 2>/dev/null; rm -rf "$work"' EXIT
cd "$work" || exit 1
mkdir m

args=(--model resnet20 --backend cpu --data synthetic:1,16,16,4,160 --batch 16 --lr 0.1 --seed 3
      --threads 1 --loader-threads 1 --print-every 1 --epochs 50 --out m/run)
lines() { cat m/run/metrics.jsonl 2>/dev/null | wc -l; }

for how in EIO EROFS; do
	umount m 2>/dev/null
	truncate -s 0 img && truncate -s 64m img && mkfs.ext4 -q -F -E nodiscard img &&
		mount -o loop,errors=remount-ro img m && mkdir m/run ||
		{ fail "$how: mkfs.ext4 and mount -o loop of a 64 MiB image"; continue; }
	dev=$(basename "$(findmnt -n -o SOURCE m)")
	"$bin" "${args[@]}" 2>$how.log &
	pid=$!
	t=0
	while [ "$(lines)" -lt 25 ] && kill -0 $pid 2>/dev/null && [ $t -lt 2400 ]; do sleep 0.05; t=$((t + 1)); done
	if [ $how = EIO ]; then
		# EXT4_IOC_SHUTDOWN = _IOR('X', 125, __u32), EXT4_GOING_FLAGS_NOLOGFLUSH
		"$py" -c 'import fcntl, os, struct, sys
fcntl.ioctl(os.open(sys.argv[1], os.O_RDONLY), 0x8004587d, struct.pack("I", 2))' m ||
			fail "EIO: FS_IOC_SHUTDOWN"
		cause="Input/output error"
	else
		echo 1 >"/sys/fs/ext4/$dev/trigger_fs_error" || fail "EROFS: /sys/fs/ext4/$dev/trigger_fs_error"
		# ext4 aborts its journal on the error: a write already under
		# way may fail with EIO before the remount makes the rest EROFS.
		cause="(Read-only file system|Input/output error)"
	fi
	wait $pid
	rc=$?
	pid=
	msg=$(grep "^dljob: rank 0:" $how.log)
	check "$how: exit status 1 (got $rc)" [ $rc -eq 1 ]
	check "$how: one line naming the file and the cause: $msg" \
		grep -Eq "^dljob: rank 0: (writing|cannot write|cannot rename) m/run/[^ ]*(metrics\.jsonl|events\.out\.tfevents\.[^ ]*|checkpoint\.safetensors)[ :].*$cause" $how.log
	umount m && mount -o loop img m || { fail "$how: mount the image again"; continue; }
	"$bin" "${args[@]}" --steps 60 --resume 2>$how-2.log
	check "$how: --resume continues from the last checkpoint" \
		bash -c "grep -q 'resumed from m/run/checkpoint' $how-2.log && grep -q 'done after 60 steps' $how-2.log"
	check "$how: dljob report reads the whole log" "$bin" report m/run
done
finish
