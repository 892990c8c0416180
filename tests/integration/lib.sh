# Shared by the integration tests: every process they start runs under a
# timeout, and each test runs with its own configuration file.
set -u
UROCE=${UROCE:?path to the uroce command}
T=${T:-20}
export UROCE_CONFIG=$(mktemp /tmp/uroce-it-XXXXXX.conf)
rm -f "$UROCE_CONFIG" # no file: the embedded default, uroce0 on lo
# A sanitizer build's library needs its runtime loaded first in programs
# that were not built with it (CMake sets UROCE_PRELOAD then).
if [ -n "${UROCE_PRELOAD:-}" ]; then export LD_PRELOAD=$UROCE_PRELOAD; fi
fails=0
passes=0
trap 'rm -f "$UROCE_CONFIG" "$UROCE_CONFIG".tmp.*' EXIT

ok() { passes=$((passes + 1)); }
bad() { fails=$((fails + 1)); echo "FAIL: $*" >&2; }

# expect_match TEXT REGEX DESCRIPTION
expect_match() {
	if printf '%s\n' "$1" | grep -Eq -- "$2"; then ok; else bad "$3: no line matches /$2/"; printf '%s\n' "$1" | sed 's/^/    | /' >&2; fi
}

# expect_status WANT GOT DESCRIPTION
expect_status() {
	if [ "$1" = "$2" ]; then ok; else bad "$3: exit status $2, expected $1"; fi
}

finish() {
	echo "$passes passed, $fails failed"
	[ "$fails" -eq 0 ]
}
