#!/bin/bash
# dljob beside a container plugin, in both plugstack.conf orders.  The
# container plugin is tests/slurm/container_spank.c, a stand-in for pyxis
# (NOT pyxis): --container-image=DIR sets DIR/environment over every task's
# environment with overwrite, as pyxis imports the container's (an "image"
# that sets its own PATH, NCCL_*, RANK, MASTER_PORT as enroot's pytorch hook
# does, CUDA_VISIBLE_DEVICES, PYTORCH_VERSION), and moves the task to a new
# mount namespace.  img's PATH starts with img/bin, which holds an image's
# own `dljob`; img2's is a plain Debian PATH without the site's runtime.
#   env mode: the task gets exactly dljob's variables, as without a
#     container; the user's own NCCL_SOCKET_IFNAME (set at submission) wins
#     over both dljob's and the image's; with no mapping the image's NIC
#     variables are removed.
#   model mode: the README's command (`srun --container-image=IMG
#     --dl-job=MODEL ... dljob`) runs the site's runtime (never the image's
#     dljob, whatever the image's PATH) with dljob's variables; another
#     command is refused with what it is and where it was looked up.
#   data_allow: a directory mounted over an allowed path is refused, in
#     either order; a directory the user cannot list is named with its errno.
# With the container plugin listed after dljob.so, Slurm 23.11+ gets this
# through spank_prepend_task_argv; on older Slurm the step is refused
# before anything runs, with a message naming the fix.
. "${DLJOB_SRCDIR:?run under make check}/tests/slurm/test_spank_lib.bash" || exit 1
so=$DLJOB_BUILDDIR/tests/slurm/.libs/container_spank.so
[ -f "$so" ] || fail "$so is not built"
spank_cluster_up
cd "$WORK" || fail "cd $WORK"
read -r maj min < <(srun --version | sed -n 's/^slurm[^ ]* \([0-9]*\)\.\([0-9]*\).*/\1 \2/p')
[ -n "$maj" ] || fail "cannot read srun --version"
prepend=0
[ $((maj * 100 + min)) -ge 2311 ] && prepend=1
T=$DLJOB_SRCDIR/mapping/test/topologies
fake=$DLJOB_SRCDIR/tests/slurm/test_spank_fake_runtime.sh
export FAKE_RUNTIME_LOG=$WORK/log
mkdir -p log data/x img/bin img2 || fail mkdir
runtime_on_path "$fake"
debian_path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
echo "PATH=$debian_path" >img2/environment || fail "img2/environment"
echo "PATH=$WORK/img/bin:$debian_path" >img/environment || fail "img/environment"
cat >>img/environment <<'EOT'
NCCL_SOCKET_IFNAME=image_if
NCCL_IB_HCA=image_hca
MASTER_PORT=61234
RANK=99
LOCAL_RANK=99
CUDA_VISIBLE_DEVICES=7
PYTORCH_VERSION=2.3.0
EOT
printf '#!/bin/sh\necho "the image'"'"'s dljob ran" >%s/impostor\n' "$WORK" >img/bin/dljob && chmod +x img/bin/dljob || fail "img/bin/dljob"

args="runtime=$fake topology=$T/2s-8gpu-4hca.xml data_allow=$WORK/data"
order() {
	case $1 in
	dljob-first) printf 'required %s %s\nrequired %s\n' "$DLJOB_SPANK" "$args" "$so" ;;
	container-first) printf 'required %s\nrequired %s %s\n' "$so" "$DLJOB_SPANK" "$args" ;;
	esac >"$CLUSTER_DIR/plugstack.conf.new" && mv -f "$CLUSTER_DIR/plugstack.conf.new" "$CLUSTER_DIR/plugstack.conf" ||
		fail "plugstack.conf"
}
vars="RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT CUDA_VISIBLE_DEVICES DLJOB_GPU NCCL_IB_HCA NCCL_SOCKET_IFNAME"
probe='for v in '"$vars"'; do echo "$SLURM_PROCID $v=${!v-unset}"; done'
# MASTER_PORT is dljob's when it is in master_port_range (29500-29999;
# its value changes with the step id), never the image's 61234.
port_re='29[5-9][0-9][0-9]'
run_env() {
	srun -w n1 -n2 -O --gres=gpu:2 --dl-job=env "$@" bash -c "$probe" 2>err.txt |
		sed "s/ MASTER_PORT=$port_re\$/ MASTER_PORT=dljob's/" | sort
	return "${PIPESTATUS[0]}"
}

# Without a container: what every task must get.
order dljob-first
run_env >want.txt || fail "srun --dl-job=env: $(cat err.txt)"
grep -q '^1 RANK=1$' want.txt && grep -q '^0 NCCL_SOCKET_IFNAME==ib0$' want.txt ||
	fail "unexpected variables without a container: $(cat want.txt)"
NCCL_SOCKET_IFNAME=mine run_env >want_user.txt || fail "srun with the user's NCCL_SOCKET_IFNAME: $(cat err.txt)"
grep -q '^0 NCCL_SOCKET_IFNAME=mine$' want_user.txt || fail "the user's NCCL_SOCKET_IFNAME lost: $(cat want_user.txt)"

for o in container-first dljob-first; do
	order $o
	if [ $o = dljob-first ] && [ $prepend = 0 ]; then
		out=$(run_env --container-image="$WORK/img") && fail "$o on Slurm $maj.$min: env mode ran: $out"
		grep -qF "dljob: --dl-job=env with a container (--container-image/--container-name): the container plugin is listed after dljob.so in plugstack.conf" err.txt &&
			grep -qF "list dljob.so after it (pyxis), or use Slurm 23.11 or later" err.txt ||
			fail "$o on Slurm $maj.$min: no clear refusal: $(cat err.txt)"
		echo "ok   $o, Slurm $maj.$min: env mode with a container refused: $(head -1 err.txt)"
		rm -f log/* impostor
		srun -w n1 -n1 --container-image="$WORK/img" --dl-job=resnet20 --dl-data=data/x dljob >out.txt 2>err.txt &&
			fail "$o on Slurm $maj.$min: model mode ran"
		grep -qF "dljob: --dl-job=resnet20 with a container" err.txt || fail "$o: no clear refusal: $(cat err.txt)"
		[ -z "$(ls log)" ] && [ ! -e impostor ] || fail "$o: something ran: $(ls log) $(cat impostor 2>/dev/null)"
		echo "ok   $o, Slurm $maj.$min: model mode with a container refused before anything ran"
		continue
	fi
	run_env --container-image="$WORK/img" >got.txt || fail "$o: srun --container-image: $(cat err.txt)"
	diff want.txt got.txt >/dev/null || fail "$o: the image's variables reached the task:
$(diff want.txt got.txt)"
	echo "ok   $o, Slurm $maj.$min: env mode in a container gets dljob's variables, not the image's"
	NCCL_SOCKET_IFNAME=mine run_env --container-image="$WORK/img" >got.txt || fail "$o: $(cat err.txt)"
	diff want_user.txt got.txt >/dev/null || fail "$o: the user's NCCL_SOCKET_IFNAME did not win:
$(diff want_user.txt got.txt)"
	echo "ok   $o, Slurm $maj.$min: the user's own NCCL_SOCKET_IFNAME wins over dljob's and the image's"

	rm -f log/* impostor
	srun -w n1 -n2 -O --gres=gpu:2 --container-image="$WORK/img" --dl-job=resnet20 --dl-data=data/x dljob --steps 3 \
		>out.txt 2>err.txt || fail "$o: model mode in a container: $(cat err.txt)"
	[ ! -e impostor ] || fail "$o: the image's dljob ran instead of the site's runtime"
	[ -f log/rank1.0 ] || fail "$o: the site's runtime did not run: $(ls log) $(cat err.txt)"
	for r in 0 1; do
		grep -qx "MASTER_PORT=$port_re" log/rank$r.0 || fail "$o: rank $r's runtime got $(grep "^MASTER_PORT=" log/rank$r.0)"
		for v in RANK LOCAL_RANK CUDA_VISIBLE_DEVICES; do
			grep -qxF "$(sed -n "s/^$r //p" want.txt | grep "^$v=")" log/rank$r.0 ||
				fail "$o: rank $r's runtime got $(grep "^$v=" log/rank$r.0), want $(grep "^$r $v=" want.txt)"
		done
	done
	got=$(grep -E '^arg[0-9]+=' log/rank0.0 | tr '\n' ' ')
	[[ "$got" == "arg1=--model arg2=resnet20 arg3=--data arg4=$WORK/data/x arg5=--out arg6=$WORK/dljob-"*" arg7=--steps arg8=3 " ]] ||
		fail "$o: the runtime's arguments: $got"
	echo "ok   $o, Slurm $maj.$min: model mode in a container runs the site's runtime with dljob's variables"

	# The README's command in an image whose PATH lacks the site's
	# runtime (pyxis replaces the task's PATH with the image's).
	rm -f log/*
	srun -w n1 -n1 --container-image="$WORK/img2" --dl-job=resnet20 --dl-data=data/x dljob >out.txt 2>err.txt ||
		fail "$o: the README's command in an image without the runtime on its PATH: $(cat err.txt)"
	[ -f log/rank0.0 ] || fail "$o: the site's runtime did not run: $(cat err.txt)"
	echo "ok   $o, Slurm $maj.$min: the README's command runs the site's runtime whatever the image's PATH"

	# Another command: what it is, and where it was looked up.
	srun -w n1 -n1 --container-image="$WORK/img2" --dl-job=resnet20 --dl-data=data/x bash -c true \
		>out.txt 2>err.txt && fail "$o: model mode ran bash"
	# With the container plugin first the task's PATH is the image's.
	where="found on the task's PATH="
	[ $o = container-first ] && where="found on the task's PATH=$debian_path, not the runtime $fake"
	grep -qF "dljob: --dl-job=resnet20 runs the site's runtime $fake: give the command as the word dljob (srun --dl-job=resnet20 ... dljob); the command 'bash' is /usr/bin/bash, $where" err.txt ||
		fail "$o: no clear refusal of bash: $(cat err.txt)"
	srun -w n1 -n1 --container-image="$WORK/img2" --dl-job=resnet20 --dl-data=data/x no-such-command \
		>out.txt 2>err.txt && fail "$o: model mode ran no-such-command"
	where="on the task's PATH="
	[ $o = container-first ] && where="on the task's PATH=$debian_path"
	grep -qF "the command 'no-such-command' is not found $where" err.txt ||
		fail "$o: no clear refusal of a command not found: $(cat err.txt)"
	echo "ok   $o, Slurm $maj.$min: another command is refused with what it is on the image's PATH"

	# No mapping (GPUs 2 and 3 of the step are not in this 2-GPU
	# topology): the step runs unbound, and the image's NIC variables go.
	args="runtime=$fake topology=$T/mgmt-near-ib.xml data_allow=$WORK/data"
	order $o
	srun -w n1 -n2 -O --gres=gpu:4 --dl-job=env --container-image="$WORK/img" bash -c "$probe" >got.txt 2>err.txt ||
		fail "$o: a step without mapping failed: $(cat err.txt)"
	grep -q '^0 RANK=0$' got.txt && grep -q '^1 NCCL_SOCKET_IFNAME=unset$' got.txt &&
		grep -q '^0 NCCL_IB_HCA=unset$' got.txt || fail "$o: no mapping: the image's NIC variables stayed: $(cat got.txt)"
	NCCL_IB_HCA=mine srun -w n1 -n1 --gres=gpu:4 --dl-job=env --container-image="$WORK/img" bash -c "$probe" \
		>got.txt 2>err.txt || fail "$o: $(cat err.txt)"
	grep -q '^0 NCCL_IB_HCA=mine$' got.txt && grep -q '^0 NCCL_SOCKET_IFNAME=unset$' got.txt ||
		fail "$o: no mapping: the user's NCCL_IB_HCA lost: $(cat got.txt)"
	args="runtime=$fake topology=$T/2s-8gpu-4hca.xml data_allow=$WORK/data"
	order $o
	echo "ok   $o, Slurm $maj.$min: no GPU/NIC/NUMA mapping: the step runs, without the image's NCCL_* (the user's kept)"
done

# The same as an ordinary user (nobody): the stand-in then makes a user
# namespace for its mount namespace, as pyxis joins the container's.
chmod 755 "$WORK" && chmod -R a+rX "$WORK/img" "$WORK/img2" && mkdir -p "$WORK/u" && chmod 777 "$WORK/u" || fail "chmod"
# srun, as nobody, loads the plugins itself: copies in a directory anybody
# can read, as a site installs them (the checkout may be in a directory
# only root can enter, e.g. a CI clone under mktemp -d or /root).
pub=$WORK/pub
mkdir -p "$pub" && cp "$DLJOB_SPANK" "$so" "$fake" "$T/2s-8gpu-4hca.xml" "$pub/" && chmod -R a+rX "$pub" ||
	fail "copying the plugins to $pub"
saved=("$DLJOB_SPANK" "$so" "$fake")
DLJOB_SPANK=$pub/${DLJOB_SPANK##*/} so=$pub/${so##*/} fake=$pub/${fake##*/}
args="runtime=$fake topology=$pub/2s-8gpu-4hca.xml data_allow=$WORK/data"
as_user() { (cd "$WORK/u" && setpriv --reuid=nobody --regid=nogroup --clear-groups env HOME="$WORK/u" "$@"); }
order dljob-first
[ "$(as_user srun -w n1 -n1 id -u 2>&1)" = "$(id -u nobody)" ] || fail "tasks as nobody: $(as_user srun -w n1 -n1 id -u 2>&1)"
as_user bash -c "$(declare -f run_env); probe='$probe' port_re='$port_re'; run_env" >want_nobody.txt 2>&1 ||
	fail "srun as nobody: $(cat want_nobody.txt)"
grep -q '^1 RANK=1$' want_nobody.txt || fail "as nobody, without a container: $(cat want_nobody.txt)"
for o in container-first dljob-first; do
	order $o
	[ $o = dljob-first ] && [ $prepend = 0 ] && continue
	as_user bash -c "$(declare -f run_env); probe='$probe' port_re='$port_re'; run_env --container-image='$WORK/img'" \
		>got.txt 2>&1 || fail "$o as nobody: $(cat got.txt)"
	diff want_nobody.txt got.txt >/dev/null || fail "$o as nobody: the image's variables reached the task:
$(diff want_nobody.txt got.txt)"
	echo "ok   $o, Slurm $maj.$min, as an ordinary user: env mode in a container gets dljob's variables"
done
# A directory only root can list, mounted by the user over their own
# --dl-data: named with its errno, not as a dataset without train/.
mkdir -p "$WORK/u/data/x" "$WORK/rootonly/train" && chmod 700 "$WORK/rootonly" && chmod -R a+rX "$WORK/img2" &&
	chmod 777 "$WORK/u/data" "$WORK/u/data/x" || fail "rootonly"
args="runtime=$fake topology=$pub/2s-8gpu-4hca.xml"
order container-first
as_user srun -w n1 -n1 --container-image="$WORK/img2" --container-mounts="$WORK/rootonly:$WORK/u/data/x" \
	--dl-job=resnet20 --dl-data=data/x dljob >out.txt 2>err.txt && fail "as nobody: a root-only --dl-data was accepted"
grep -qF "dljob: --dl-data=data/x ($WORK/u/data/x): Permission denied (the step's user must be able to list it)" err.txt ||
	fail "as nobody: no errno for a root-only --dl-data: $(cat err.txt)"
echo "ok   container-first, Slurm $maj.$min, as an ordinary user: a --dl-data it cannot list is named with its errno"
DLJOB_SPANK=${saved[0]} so=${saved[1]} fake=${saved[2]}

# A dataset that exists only inside the container (here: under a mount
# the container plugin makes): srun leaves it to the task, which checks it
# inside the container (container plugin first).  Without a container
# option srun still refuses a missing directory.  With data_allow it is
# refused: data_allow allows only the node's own directories.
mkdir -p imgroot/data/x vol img2 && rm -f log/* || fail "mkdir imgroot"
args="runtime=$fake topology=$T/2s-8gpu-4hca.xml"
order container-first
out=$(srun -w n1 -n1 --dl-job=resnet20 --dl-data="$WORK/vol/data/x" dljob 2>&1) && fail "srun accepted a missing --dl-data"
grep -qF "dljob: --dl-data=$WORK/vol/data/x: No such file or directory" <<<"$out" || fail "missing --dl-data: $out"
srun -w n1 -n1 --container-image="$WORK/img2" --container-mounts="$WORK/imgroot:$WORK/vol" \
	--dl-job=resnet20 --dl-data="$WORK/vol/data/x" dljob >out.txt 2>err.txt ||
	fail "a dataset that exists only in the container was refused: $(cat err.txt)"
grep -qx "arg4=$WORK/vol/data/x" log/rank0.0 || fail "the runtime's --data: $(grep '^arg' log/rank0.0)"
echo "ok   container-first, Slurm $maj.$min: a --dl-data that exists only in the container is accepted"
args="runtime=$fake topology=$T/2s-8gpu-4hca.xml data_allow=$WORK"
order container-first
rm -f log/*
srun -w n1 -n1 --container-image="$WORK/img2" --container-mounts="$WORK/imgroot:$WORK/vol" \
	--dl-job=resnet20 --dl-data="$WORK/vol/data/x" dljob >out.txt 2>err.txt &&
	fail "data_allow: a dataset that exists only in the container was accepted"
grep -qF "dljob: --dl-data=$WORK/vol/data/x: No such file or directory, on the node outside any container (data_allow allows only the node's own directories" err.txt ||
	fail "data_allow: no clear refusal of a dataset only in the container: $(cat err.txt)"
[ -z "$(ls log)" ] || fail "something ran: $(ls log)"
echo "ok   container-first, Slurm $maj.$min: with data_allow, a --dl-data that exists only in the container is refused"

# data_allow with the container plugin first: dljob checks --dl-data on
# the node in user_init, before the task moves, and in the task compares
# the directory it sees (device and inode): a user's mount of their own
# directory over the allowed path is refused, the allowed one mounted at
# its own path (a bind mount: same device and inode) is not.
args="runtime=$fake topology=$T/2s-8gpu-4hca.xml data_allow=$WORK/data"
order container-first
mkdir -p private && echo secret >private/secret && rm -f log/* || fail "private"
srun -w n1 -n1 --container-image="$WORK/img2" --container-mounts="$WORK/private:$WORK/data/x" \
	--dl-job=resnet20 --dl-data=data/x dljob >out.txt 2>err.txt &&
	fail "container-first: a directory mounted over an allowed --dl-data was accepted"
grep -qF "dljob: --dl-data=$WORK/data/x: another directory than the node's, which data_allow allowed, is at that path in the task (a container mount over it?)" err.txt ||
	fail "container-first: no clear refusal of the mounted-over data: $(cat err.txt)"
[ -z "$(ls log)" ] || fail "something ran: $(ls log)"
srun -w n1 -n1 --container-image="$WORK/img2" --container-mounts="$WORK/data/x:$WORK/data/x:ro" \
	--dl-job=resnet20 --dl-data=data/x dljob >out.txt 2>err.txt ||
	fail "container-first: the allowed directory mounted at its own path was refused: $(cat err.txt)"
srun -w n1 -n1 --container-image="$WORK/img2" --container-mounts="$WORK/private:$WORK/data/x" \
	--dl-job=env --dl-data=data/x true >out.txt 2>err.txt &&
	fail "container-first: env mode: a directory mounted over an allowed --dl-data was accepted"
grep -qF "another directory than the node's, which data_allow allowed" err.txt || fail "env mode: $(cat err.txt)"
echo "ok   container-first, Slurm $maj.$min: data_allow: a directory mounted over the allowed path is refused"

# A runtime that is not mounted into the container (the container plugin
# runs first, so dljob checks inside it): one line naming the fix.
order container-first
mkdir -p empty && rm -f log/* || fail "mkdir empty"
srun -w n1 -n1 --container-image="$WORK/img" --container-mounts="$WORK/empty:$(dirname "$fake")" \
	--dl-job=resnet20 --dl-data=data/x dljob >out.txt 2>err.txt && fail "ran without the runtime in the container"
grep -qF "dljob: cannot run the runtime $fake inside the container: No such file or directory; mount its installation into the container at the same path" err.txt ||
	fail "no clear message for a runtime missing in the container: $(cat err.txt)"
[ -z "$(ls log)" ] || fail "something ran: $(ls log)"
echo "ok   container-first, Slurm $maj.$min: a runtime missing in the container is named with the mount to add"

# A runtime whose library is not mounted into the container: its loader,
# asked by dljob inside the container, names the library.
needs=$DLJOB_BUILDDIR/tests/slurm/needs_lib
[ -x "$needs" ] || fail "$needs is not built"
args="runtime=$needs data_allow=$WORK/data"
order container-first
srun -w n1 -n1 --container-image="$WORK/img2" --container-mounts="$WORK/empty:$DLJOB_BUILDDIR/tests/slurm/.libs" \
	--dl-job=resnet20 --dl-data=data/x dljob >out.txt 2>err.txt && fail "ran without the runtime's library"
grep -qF "dljob: cannot run the runtime $needs inside the container: libdljob_testdep.so not found there; mount the runtime's libraries" err.txt ||
	fail "no clear message for a library missing in the container: $(cat err.txt)"
srun -w n1 -n1 --container-image="$WORK/img2" --dl-job=resnet20 --dl-data=data/x dljob >out.txt 2>err.txt
grep -q "not found there" err.txt && fail "a loadable runtime was refused: $(cat err.txt)"
echo "ok   container-first, Slurm $maj.$min: a library of the runtime missing in the container is named"
args="runtime=$fake topology=$T/2s-8gpu-4hca.xml data_allow=$WORK/data"

# data_allow where the data is opened: with dljob listed first (Slurm
# 23.11+) the plugin checks --dl-data on the node and the real runtime,
# inside the "container", refuses a directory that a user's container mount
# put over that path (with the container plugin first, the plugin refuses
# it, above; on Slurm 22.05 the step is refused, above).
if [ $prepend = 1 ]; then
	[ -x "${DLJOB_BIN:-}" ] || fail "DLJOB_BIN=${DLJOB_BIN:-} is not built"
	args="runtime=$DLJOB_BIN data_allow=$WORK/data"
	order dljob-first
	mkdir -p private && echo secret >private/secret || fail "private"
	srun -w n1 -n1 --container-image="$WORK/img" --container-mounts="$WORK/private:$WORK/data/x" \
		--dl-job=resnet20 --dl-data=data/x --dl-out=run dljob >out.txt 2>err.txt &&
		fail "the runtime trained on a directory mounted over --dl-data"
	grep -qF "dljob: --data $WORK/data/x: not the directory that srun --dl-data named and the plugin checked (data_allow)" err.txt ||
		fail "no clear refusal of the mounted-over data: $(cat err.txt)"
	srun -w n1 -n1 --container-image="$WORK/img" --dl-job=resnet20 --dl-data=data/x --dl-out=run dljob >out.txt 2>err.txt
	grep -q "not the directory" err.txt && fail "the unmounted --dl-data was refused: $(cat err.txt)"
	grep -qF "dljob: --data $WORK/data/x:" err.txt || fail "the runtime did not open the (empty) data: $(cat err.txt)"
	echo "ok   dljob-first, Slurm $maj.$min: the runtime refuses a directory mounted over --dl-data in the container"
fi
nodes_idle
