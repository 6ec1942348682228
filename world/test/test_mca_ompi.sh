#!/bin/bash
# dljob's reading of Open MPI's parameter files (dl_mca_file_names, an
# emulation of Open MPI 4.1's keyval scanner and parser) against Open MPI's
# own: for each file, whether ompi_info reports btl_tcp_if_include as set
# from it equals test_world_ompi --scan's answer.  The files: the forms of
# test_world_ompi.c (comments, stray bytes, --mca/-x lines, long names)
# and the fuzz_mca seeds.
set -u
scan=$DLJOB_BUILDDIR/world/test/test_world_ompi
ompi_info=$(command -v ompi_info) || { echo "FAIL: ompi_info not found (openmpi-bin)"; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/dljob-mca.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
fails=0 n=0 set=0

i=0
while IFS= read -r line; do
	i=$((i + 1))
	printf -- "$line" >"$work/case$i"
done <<'CASES'
btl_tcp_if_include = eth0\n
  \tbtl_tcp_if_include\t= eth0\r\n
btl_tcp_if_include =\n
btl_tcp_if_include\n
btl_tcp_if_include\r = eth0\n
\vbtl_tcp_if_include\f=\veth0\n
x btl_tcp_if_include = 1\n
@btl_tcp_if_include = eth0\n
a@btl_tcp_if_include = eth0\n
a=b btl_tcp_if_include = eth0\n
\0btl_tcp_if_include = eth0\n
# btl_tcp_if_include = eth0\n
# btl_tcp_if_include = eth0
// btl_tcp_if_include = eth0\n
/*\nbtl_tcp_if_include = eth0\n# */ x = 1\n
/* x */ btl_tcp_if_include = eth0\n
/*\n# **/btl_tcp_if_include = eth0\n
--mca btl_tcp_if_include eth0\n
-mca\tbtl_tcp_if_include 10.0.0.0/8
--mca a b --mca btl_tcp_if_include 'eth0' \n
--mca a #b @btl_tcp_if_include = eth0\n
--mca a 'b c' @btl_tcp_if_include = x\n
--mca btl_tcp_if_include\n-x btl_tcp_if_include=1\n-x btl_tcp_if_include\n
-mca --mcabtl_tcp_if_include eth0\n
-x A=b @btl_tcp_if_include = x\n
opal_btl_tcp_if_include = eth1\n
CASES

for f in "$work"/case* "$DLJOB_SRCDIR"/tests/fuzz/corpus/fuzz_mca/*; do
	d=$("$scan" --scan "$f")
	o=$(OMPI_MCA_mca_base_param_files=$f HOME=$work timeout 60 "$ompi_info" --param btl tcp --level 9 \
		--parsable 2>/dev/null | grep -c 'btl_tcp_if_include:source:file')
	n=$((n + 1))
	set=$((set + o))
	if [ "$d" != "$o" ]; then
		echo "FAIL: $(basename "$f"): dljob says $d, Open MPI $o: $(od -An -c "$f" | head -3 | tr -s ' ')"
		fails=$((fails + 1))
	fi
done
echo "$n files, $set set btl_tcp_if_include for Open MPI ($("$ompi_info" --version | head -1)), $fails differ"
[ "$set" -gt 0 ] && [ "$set" -lt "$n" ] || { echo "FAIL: every file answered alike"; fails=$((fails + 1)); }
[ $fails -eq 0 ]
