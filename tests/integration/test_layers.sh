#!/usr/bin/env bash
# Calls go down only (docs/architecture.md, Layers and folders): no
# object file of a layer refers to a symbol that only a layer above it
# defines. The include paths already keep a layer from seeing the headers
# above it; this catches a declaration written by hand instead.
#
#   test_layers.sh  with ENGINE, SHM, ROCE and VERBS: each a ;-separated list
#   of the layer's object files (CMake's TARGET_OBJECTS)
set -u
fails=0
globals() { # OBJECTS...: the global symbols they define
	nm --defined-only "$@" 2>/dev/null | awk 'NF == 3 && $2 ~ /^[TDBRVW]$/ { print $3 }' | sort -u
}
wanted() { # OBJECTS...: the symbols they refer to and do not define
	nm -u "$@" 2>/dev/null | awk 'NF && $0 !~ /:$/ { print $NF }' | sort -u
}
IFS=';' read -r -a engine <<<"$ENGINE"
IFS=';' read -r -a shm <<<"$SHM"
IFS=';' read -r -a roce <<<"$ROCE"
IFS=';' read -r -a verbs <<<"$VERBS"
for o in "${engine[@]}" "${shm[@]}" "${roce[@]}" "${verbs[@]}"; do
	[ -f "$o" ] || {
		echo "FAIL: no object file $o"
		exit 1
	}
done
check() { # NAME "UPPER OBJECTS" LOWER OBJECTS...
	local name=$1 upper=$2 up
	shift 2
	IFS=' ' read -r -a up <<<"$upper"
	local bad
	bad=$(comm -12 <(wanted "$@") <(globals "${up[@]}"))
	if [ -n "$bad" ]; then
		echo "FAIL: $name calls up into the layers above it: $(echo $bad)"
		fails=$((fails + 1))
	fi
}
check "src/engine" "${shm[*]} ${roce[*]} ${verbs[*]}" "${engine[@]}"
# The two transports are siblings: neither calls the other.
check "src/transport/shm" "${roce[*]} ${verbs[*]}" "${shm[@]}"
check "src/transport/roce" "${shm[*]} ${verbs[*]}" "${roce[@]}"
# The checks can fail: the verbs layer does call down, into each of them.
calls_into() { # NAME OBJECTS...: the verbs layer refers to a symbol they define
	[ -n "$(comm -12 <(wanted "${verbs[@]}") <(globals "${@:2}"))" ] && return
	echo "FAIL: the verbs layer refers to nothing of $1's: the checks see nothing"
	fails=$((fails + 1))
}
calls_into src/engine "${engine[@]}"
calls_into src/transport/shm "${shm[@]}"
calls_into src/transport/roce "${roce[@]}"
echo "$fails failed"
[ "$fails" -eq 0 ]
