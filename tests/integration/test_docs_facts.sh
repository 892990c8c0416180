#!/usr/bin/env bash
# The facts docs/architecture.md states that can drift from the code, each
# checked against the program's own output rather than against a copy: the
# device's attributes (`uroce run ibv_devinfo -v`), the counters `uroce
# stat` and `uroce stat qp` print, the CTest test names (`ctest -N` of this
# build), and the commands `uroce --help` lists. Each table sits between
# "<!-- NAME: begin -->" and "<!-- NAME: end -->" in the page; DOC in the
# environment points the test at another copy of it.
. "$(dirname "$0")/lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
DOC=${DOC:-$src/docs/architecture.md}
BUILD_DIR=${BUILD_DIR:?the build directory}

# section NAME: the lines between NAME's markers.
section() {
	sed -n "/<!-- $1: begin -->/,/<!-- $1: end -->/p" "$DOC" | sed '1d;$d'
}

# rows NAME: a table's data rows as cells separated by tabs, backquotes
# and the cells' padding dropped (the header and its rule are not rows).
rows() {
	section "$1" | grep '^|' | sed '1,2d' |
		sed -e 's/^| *//' -e 's/ *|$//' -e 's/ *| */\t/g' -e 's/`//g'
}

# same WHAT DOCS_LIST PROGRAM_LIST: two newline-separated lists, in order.
same() {
	if [ -z "$2" ]; then
		bad "$1: the docs' list is empty (its table is missing or no longer parses)"
	elif [ "$2" = "$3" ]; then ok; else
		bad "$1: the docs and the program differ (< docs, > program)"
		diff <(printf '%s\n' "$2") <(printf '%s\n' "$3") | grep '^[<>]' | sed 's/^/    /' >&2
	fi
}

[ -r "$DOC" ] || { bad "no $DOC"; finish; exit; }
for s in device-attributes port-counters qp-counters tests uroce-commands; do
	[ -n "$(section $s)" ] || bad "$DOC has no '$s' section between its markers"
done

# 1. Device attributes: each row's value is what ibv_devinfo -v prints
# after the field's colon, for the embedded default device (lib.sh gives
# this test a configuration file that does not exist).
devinfo=$(timeout $T "$UROCE" run ibv_devinfo -v 2>&1); st=$?
expect_status 0 $st "uroce run ibv_devinfo -v"
n=0
while IFS=$'\t' read -r field want; do
	n=$((n + 1))
	got=$(printf '%s\n' "$devinfo" | sed -n "s/^[[:space:]]*$field:[[:space:]]*//p" | head -1)
	if [ "$got" = "$want" ]; then ok; else
		bad "device attribute $field: the docs say '$want', ibv_devinfo -v prints '${got:-nothing}'"
	fi
done < <(rows device-attributes)
[ $n -ge 10 ] || bad "device attributes: only $n rows"

# 2. Port counters: the names `uroce stat` prints for the device, in its
# order ("link DEV/1 NAME VALUE NAME VALUE ...").
out=$(timeout $T "$UROCE" stat uroce0 2>&1); st=$?
expect_status 0 $st "uroce stat uroce0"
printed=$(printf '%s\n' "$out" | awk '/^link /{for (i = 3; i < NF; i += 2) print $i; exit}')
same "port counters" "$(rows port-counters | cut -f1)" "$printed"

# QP counters: a QP must exist to be printed. ibv_rc_pingpong's server
# makes its QP before it waits for a client, so its QP is listed while it
# waits; any QP's line names the same counters. Between "rq-psn N" and
# "pid N" come the counters.
port=$((20000 + $$ % 10000))
timeout $T "$UROCE" run ibv_rc_pingpong -g 0 -p $port >/dev/null 2>&1 &
srv=$!
wait_listen $port || bad "ibv_rc_pingpong never listened on $port"
line=$(timeout $T "$UROCE" stat qp uroce0 2>&1 | grep -m1 ' lqpn ')
kill $srv 2>/dev/null
wait $srv 2>/dev/null
if [ -z "$line" ]; then
	bad "uroce stat qp lists no QP while ibv_rc_pingpong waits"
else
	printed=$(printf '%s\n' "$line" | awk '{
		for (i = 1; i < NF; i++) if ($i == "rq-psn") break
		for (i += 2; i < NF && $i != "pid"; i += 2) print $i }')
	same "QP counters" "$(rows qp-counters | cut -f1)" "$printed"
fi

# 3. Tests: the rows this build must register, by each row's condition as
# this build's cache answers it, are exactly what ctest -N lists; and each
# row's source exists.
cache=$BUILD_DIR/CMakeCache.txt
found() { # CACHE_VARIABLE: a program CMake found
	local v
	v=$(sed -n "s/^$1:[A-Z]*=//p" "$cache")
	[ -n "$v" ] && [ "${v%NOTFOUND}" = "$v" ]
}
sanitize=$(sed -n 's/^UROCE_SANITIZE:BOOL=//p' "$cache")
holds() { # CONDITION, a comma-separated list: does it hold in this build?
	local c
	IFS=, read -ra conds <<<"$1"
	for c in "${conds[@]}"; do
		c=${c# }
		case $c in
		always) ;;
		valgrind) found VALGRIND || return 1 ;;
		clang) found CLANG || return 1 ;;
		clang-format) found CLANG_FORMAT || return 1 ;;
		"no sanitizer") [ "$sanitize" != ON ] || return 1 ;;
		*)
			bad "test table: unknown condition '$c'"
			return 1
			;;
		esac
	done
}
want=""
while IFS=$'\t' read -r name file cond; do
	[ -e "$src/${file%% *}" ] && ok || bad "test $name: its source ${file%% *} is not in the repository"
	holds "$cond" && want+="$name"$'\n'
done < <(rows tests)
dups=$(rows tests | cut -f1 | sort | uniq -d)
[ -z "$dups" ] && ok || bad "test table: named twice: $dups"
registered=$(cd "$BUILD_DIR" && ctest -N 2>&1 | sed -n 's/^ *Test *#[0-9]*: //p' | sort)
[ -n "$registered" ] || bad "ctest -N in $BUILD_DIR lists no test"
same "CTest tests (this build's conditions applied to the table)" \
	"$(printf '%s' "$want" | sort)" "$registered"

# 4. Commands: every command `uroce --help` lists is in the docs' list.
usage=$(timeout $T "$UROCE" --help 2>&1)
commands=$(printf '%s\n' "$usage" | sed -n 's/^  \([^ ,]\+\).*/\1/p' | sort -u)
[ -n "$commands" ] || bad "uroce --help lists no command"
listed=$(section uroce-commands | sed -n 's/^- `\([^`]*\)`.*/\1/p')
for c in $commands; do
	if printf '%s\n' "$listed" | grep -qxF -- "$c"; then ok; else
		bad "command '$c' of uroce --help is not in the docs' command list"
	fi
done
finish
