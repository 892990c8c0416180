#!/usr/bin/env bash
# The repository stands alone: no file points a reader at something only
# its authors had. Every file git tracks (and every new file it does not
# ignore) is read, except the binary captures under tests/data/, and this
# fails with FILE:LINE for each of:
#   - a path into the shared directory beside the checkout (dot-dot, or
#     /work, then /shared): it is not part of the repository;
#   - the design document named, outside docs/, other than by its path
#     under docs/ (which is in the repository): a bare name, or a path
#     from elsewhere, pointed at the copy outside;
#   - an issue number (an issue, issues, issue #N, with or without "item
#     M"): issues live in a tracker, not here; say what was asked instead;
#   - the wire notes (roce-wire, cm-wire) by a name no tracked file has.
# Nothing here spells a match out, so the scan passes over itself.
# --exclude PREFIX (repeatable) leaves out the files under PREFIX, for
# checking one part of the tree while another is being changed.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
excludes=()
while [ $# -gt 0 ]; do
	case $1 in
	--exclude) excludes+=("${2:?--exclude needs a path prefix}"); shift 2 ;;
	*) echo "usage: $0 [--exclude PREFIX]..." >&2; exit 2 ;;
	esac
done
cd "$root"
if ! timeout 30 git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	echo "SKIP: $root is not a git checkout"
	exit 77
fi

files=()
while IFS= read -r -d '' f; do
	[ -f "$f" ] || continue # deleted, not yet staged
	case $f in tests/data/*) continue ;; esac
	for x in ${excludes[@]+"${excludes[@]}"}; do
		case $f in "$x"*) continue 2 ;; esac
	done
	files+=("$f")
done < <(timeout 60 git ls-files -z --cached --others --exclude-standard)
[ ${#files[@]} -gt 0 ] || { echo "FAIL: git lists no file under $root" >&2; exit 1; }
tracked=$(timeout 60 git ls-files --cached --others --exclude-standard)

found=0
# report WHY PCRE [FILES...]: each matching line, as FILE:LINE: WHY: text.
report() {
	local why=$1 re=$2 out st=0
	shift 2
	[ $# -gt 0 ] || return 0
	out=$(timeout 60 grep -InHP -- "$re" "$@") || st=$?
	[ $st -le 1 ] || { echo "FAIL: grep failed ($st) on /$re/" >&2; exit 1; }
	[ -n "$out" ] || return 0
	found=$((found + $(printf '%s\n' "$out" | wc -l)))
	printf '%s\n' "$out" | sed -E "s#^([^:]+:[0-9]+):#\1: $why: #" >&2
}

report "a path outside the repository" '(\.\.|/work)/shared\b' "${files[@]}"
outside_docs=()
for f in "${files[@]}"; do
	case $f in docs/*) ;; *) outside_docs+=("$f") ;; esac
done
report "the design document, not by its path docs/design.md" '(?<!docs/)\bdesign\.md' \
	${outside_docs[@]+"${outside_docs[@]}"}
report "an issue number" '(?i)\bissues?\s*#?\s*[0-9]+' "${files[@]}"
for stem in roce-wire cm-wire; do
	printf '%s\n' "$tracked" | grep -q "\(^\|/\)$stem\.md\$" && continue
	report "$stem.md is not in the repository" "\\b$stem\\.md\\b" "${files[@]}"
done

if [ $found -gt 0 ]; then
	echo "$found line(s) point outside the repository" >&2
	exit 1
fi
echo "${#files[@]} files, no reference outside the repository"
