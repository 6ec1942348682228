#!/bin/bash
# The man pages and help texts name what the tables hold (dljob
# --list-options: the tables of runtime/cli.c, of the subcommands in
# runtime/*.c (runtime/opttab.h), common/models.h, common/handoff.h):
# every option of the runtime's command line, its subcommands and models
# in dljob(1), each option also in dljob --help; every option of a
# subcommand in its man page dljob-NAME(1) and in dljob NAME --help;
# every --dl-* option the plugin registers and every model --dl-job
# offers (spank/test/list_spank_options) and every DLJOB_* variable the
# plugin hands to the task in spank-dljob(8).  A row added to a table
# without a line in its man page fails here.  The help texts name the
# models in short (resnet18|34|50...): each model must be there too.
set -u
src=${DLJOB_SRCDIR:?run under make check}
bin=${DLJOB_BIN:?run under make check}
lister=${DLJOB_BUILDDIR:?run under make check}/spank/test/list_spank_options
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# A man page as plain text: roff's \- as -, font changes and \& dropped,
# request names (.B, .BI, ...) kept apart from the words after them.
plain() {
	sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' -e 's/\\f(..//g' -e 's/\\&//g' -e 's/\\c$//' \
	    -e 's/^\.[A-Za-z]* //' "$1"
}
runtime_man=$(plain "$src/man/dljob.1") || exit 1
plugin_man=$(plain "$src/man/spank-dljob.8") || exit 1

# has TEXT PATTERN: PATTERN (grep -E) somewhere in TEXT, not followed by
# a letter, digit, - or _ (so --init does not count for --init-head).
has() { grep -qE -- "$2"'([^A-Za-z0-9_-]|$)' <<<"$1"; }

# in_short TEXT NAME: NAME in TEXT, or its number after a | or / of a list
# that names another model of its family (resnet18|34 names resnet34).
in_short() {
	local fam=${2%%[0-9]*} num=${2##*[!0-9]}
	has "$1" "$2" || { [ -n "$num" ] && has "$1" "$fam[0-9]+([|/][0-9]+)*[|/]$num"; }
}
usage=$("$bin" --help) || { echo "FAIL: dljob --help"; exit 1; }
model_help=$(grep -- '--model NAME ' <<<"$usage")
runtime=$("$bin" --list-options) || { echo "FAIL: dljob --list-options"; exit 1; }
plugin=$("$lister") || { echo "FAIL: $lister"; exit 1; }
dl_job_help=$(sed -n 's/^help //p' <<<"$plugin")
# A subcommand's man page and --help, read at its first option.
declare -A sub_man sub_help
sub_read() {
	[ -n "${sub_man[$1]+set}" ] && return
	sub_man[$1]=
	if [ -f "$src/man/dljob-$1.1" ]; then
		sub_man[$1]=$(plain "$src/man/dljob-$1.1") || fail "cannot read man/dljob-$1.1"
	else
		fail "dljob $1 has no man page man/dljob-$1.1"
	fi
	sub_help[$1]=$("$bin" "$1" --help) || fail "dljob $1 --help"
}
n=0
while read -r kind name; do
	n=$((n + 1))
	case $kind in
	option) has "$runtime_man" "$name" || fail "dljob(1) does not name $name (runtime/cli.c)"
		has "$usage" "$name" || fail "dljob --help does not name $name (runtime/cli.c)" ;;
	subcommand) has "$runtime_man" "dljob $name" || fail "dljob(1) does not name dljob $name (runtime/cli.c)" ;;
	suboption) read -r sub opt <<<"$name"
		sub_read "$sub"
		has "${sub_man[$sub]}" "$opt" || fail "dljob-$sub(1) does not name $opt (dljob $sub's option table)"
		has "${sub_help[$sub]}" "$opt" || fail "dljob $sub --help does not name $opt (dljob $sub's option table)" ;;
	model) has "$runtime_man" "$name" || fail "dljob(1) does not name the model $name (common/models.h)"
		in_short "$model_help" "$name" || fail "dljob --help's --model does not name $name (common/models.h)" ;;
	handoff) has "$plugin_man" "$name" || fail "spank-dljob(8) does not name $name (common/handoff.h)" ;;
	*) fail "dljob --list-options: unknown line: $kind $name" ;;
	esac
done <<<"$runtime"
while read -r kind name; do
	n=$((n + 1))
	case $kind in
	option) has "$plugin_man" "$name" || fail "spank-dljob(8) does not name $name (spank/options.c)" ;;
	model) has "$plugin_man" "$name" || fail "spank-dljob(8) does not name the model $name (common/models.h)"
		in_short "$dl_job_help" "$name" || fail "--dl-job's help does not name $name (common/models.h)" ;;
	help) ;;
	*) fail "list_spank_options: unknown line: $kind $name" ;;
	esac
done <<<"$plugin"
# Enough rows that a lister printing nothing cannot pass.
grep -q '^option --model$' <<<"$runtime" || fail "dljob --list-options has no --model"
grep -q '^option --dl-job$' <<<"$plugin" || fail "list_spank_options has no --dl-job"
grep -q '^handoff DLJOB_MODEL$' <<<"$runtime" || fail "dljob --list-options has no DLJOB_MODEL"
# Every subcommand has its table: at least its --help.
for sub in $(sed -n 's/^subcommand //p' <<<"$runtime"); do
	grep -q "^suboption $sub --help\$" <<<"$runtime" || fail "dljob --list-options has no options of dljob $sub"
done
[ $fails -eq 0 ] || exit 1
echo "ok: dljob(1), dljob-*(1), the --help texts and spank-dljob(8) name all $n table rows"
