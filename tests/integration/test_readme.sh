#!/usr/bin/env bash
# The README's examples, as a reader would paste them: every ```sh block
# of README.md runs in a bash of its own (set -eo pipefail), under a
# timeout, from a directory where `build` is the build under test. A block
# passes when it exits 0, each command it put in the background (`&`)
# exits 0, and its output holds the text after each `# -> ` comment.
# Whatever the block leaves running is killed with its process group.
# A block whose first line is `# needs: WHY` is skipped and listed with
# WHY, unless WHY is `netdev IFACE` and that netdev exists. The README's
# section "The examples in this README are tested" says the same to its
# readers. README=FILE tests another file (this test's own check).
. "$(dirname "$0")/lib.sh" 120
src=$(cd "$(dirname "$0")/../.." && pwd)
readme=${README:-$src/README.md}
build=${BUILD_DIR:-$(dirname "$(dirname "$UROCE")")}

# A sanitizer build's runtime is for the blocks' programs, not for this
# script's own awk and grep.
preload=${LD_PRELOAD:-}
unset LD_PRELOAD

work=$(mktemp -d /tmp/uroce-readme-XXXXXX)
trap 'rm -rf "$PAIR_DIR" "$work"; rm -f "$UROCE_CONFIG" "$UROCE_CONFIG".tmp.*' EXIT
ln -s "$build" "$work/build"

# Each block to blocks/NN.sh, its first line's number in the README to
# blocks/NN.line.
mkdir "$work/blocks"
timeout $T awk -v dir="$work/blocks" '
	/^```sh[ \t]*$/ { n++; f = sprintf("%s/%02d", dir, n); print NR + 1 > (f ".line"); close(f ".line"); printf "" > (f ".sh"); inb = 1; next }
	inb && /^```[ \t]*$/ { close(f ".sh"); inb = 0; next }
	inb { print > (f ".sh") }
	END { if (inb) { print "unterminated sh block from line " (NR) > "/dev/stderr"; exit 1 } }
' "$readme" || bad "README: the sh blocks could not be read"

ran=0
skipped=()
for f in "$work"/blocks/*.sh; do
	[ -e "$f" ] || break
	where="$(basename "$readme"):$(cat "${f%.sh}.line")"
	first=$(head -1 "$f")
	if [[ $first =~ ^#\ needs:\ *(.*)$ ]]; then
		need=${BASH_REMATCH[1]}
		if [[ $need =~ ^netdev\ ([^ ]+)$ ]] && [ -e "/sys/class/net/${BASH_REMATCH[1]}" ]; then
			: # the one need this machine can meet: run it
		else
			skipped+=("$where (needs: $need)")
			continue
		fi
	elif grep -Eq 'scripts/(bootstrap|test)' "$f"; then
		# Running them would build and run the whole suite, this test too.
		bad "$where runs scripts/bootstrap or scripts/test but has no '# needs:' line"
		continue
	fi

	# The block, each `cmd &` of it noting its pid, then a wait for each:
	# a server that failed fails the block. (`jobs -p` would not do: a
	# non-interactive bash forgets a job once it has ended.) A command the
	# block waited for itself (`wait`) is no longer a child: the block's
	# own wait had its say.
	run="${f%.sh}.run"
	{
		echo 'set -eo pipefail'
		echo '__bg=()'
		sed -E 's/([^&])&[[:space:]]*(#.*)?$/\1\& __bg+=($!) \2/' "$f"
		echo 'for __p in "${__bg[@]}"; do'
		echo '	__st=0; wait "$__p" 2>"$__p.wait" || __st=$?'
		echo '	grep -q "not a child" "$__p.wait" && __st=0; rm -f "$__p.wait"'
		echo '	[ $__st = 0 ] || { echo "a background command of this block exited $__st" >&2; exit 1; }'
		echo 'done'
	} >"$run"
	out="${f%.sh}.out"
	start=$SECONDS
	# setsid: the block is a process group of its own (setsid execs timeout,
	# whose pid is then the group's id), killed whole when it is done.
	(cd "$work" && exec setsid timeout -k 5 $T env ${preload:+LD_PRELOAD=$preload} bash "$run" \
		</dev/null >"$out" 2>&1) &
	pid=$!
	wait $pid
	st=$?
	kill -TERM -- -$pid 2>/dev/null && sleep 0.5 && kill -KILL -- -$pid 2>/dev/null
	ran=$((ran + 1))
	if [ $st -ne 0 ]; then
		what="exit status $st"
		[ $st = 124 ] && what="timed out after $T s"
		bad "$where: $what"
		show_log "$out" "$where"
		continue
	fi
	missing=0
	while IFS= read -r want; do
		if ! grep -Fq -- "$want" "$out"; then
			bad "$where: the output does not show '$want'"
			missing=1
		fi
	done < <(sed -n 's/.*# -> \(.*[^ ]\) *$/\1/p' "$f")
	[ $missing = 1 ] && show_log "$out" "$where"
	[ $missing = 0 ] && ok && echo "$where: ran, $((SECONDS - start)) s"
done

[ $ran -gt 0 ] && ok || bad "no sh block of $readme ran"
for s in "${skipped[@]}"; do echo "skipped: $s"; done
finish
