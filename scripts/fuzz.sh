#!/usr/bin/env bash
# Runs every Go fuzz target in the module for FUZZTIME each (default 60s):
# `make fuzz`, part of `make test`. Targets are found by their names in
# *_test.go files, so a new one runs without being listed here. A failing
# input is written under the package's testdata/fuzz and fails the run.
#
# With --idle first, everything runs at the lowest CPU priority, so that
# `make test` can fuzz beside the unit tier, whose end-to-end tests leave
# about half of the two cores idle while guests boot and leases run out.
# nice alone is not enough where the kernel groups tasks by session
# (sched_autogroup: each session competes as one task), so the script
# starts a session of its own and lowers that group's priority as well.
set -euo pipefail
if [ "${1:-}" = --idle ]; then
	shift
	if [ -z "${VIRTPLANE_FUZZ_IDLE:-}" ]; then
		VIRTPLANE_FUZZ_IDLE=1 exec setsid --wait nice -n 19 "$0" --idle "$@"
	fi
	if [ -w /proc/self/autogroup ]; then
		echo 19 >/proc/self/autogroup
	fi
fi
cd "$(dirname "$0")/.."
fuzztime=${1:-${FUZZTIME:-60s}}
go=${GO:-go}
found=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
while IFS= read -r file; do
	dir=./$(dirname "$file")
	while IFS= read -r name; do
		found=$((found + 1))
		echo "fuzz: $dir $name for $fuzztime"
		if ! "$go" test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$dir" 2>&1 | tee "$log"; then
			# Go before 1.27 may fail a target at the end of a timed
			# -fuzztime with a bare "context deadline exceeded": its
			# coordinator's own deadline escapes the check that should
			# swallow it (go.dev/issue/75804, fixed in Go 1.27). Nothing
			# was found then; at idle priority beside busy tests, the
			# coordinator may also have printed that a stopped worker
			# took its time to exit ("waiting for fuzzing process to
			# terminate..."). Anything else, a failing input above all
			# (always written under testdata/fuzz), fails the run.
			if grep -q 'Failing input written to' "$log" ||
				[ "$(grep -cvE '^(fuzz: elapsed: |--- FAIL: '"$name"' \(|    context deadline exceeded$|waiting for fuzzing process to terminate\.\.\.$|FAIL$|exit status 1$|FAIL\s|PASS$|ok\s)' "$log")" -ne 0 ] ||
				! grep -qx '    context deadline exceeded' "$log"; then
				exit 1
			fi
			echo "fuzz: $name: Go's fuzzing coordinator reported its own deadline at the end of -fuzztime (go.dev/issue/75804); no failing input"
		fi
	done < <(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$file")
done < <(git ls-files '*_test.go' | xargs grep -l '^func Fuzz' | sort)
if [ "$found" -eq 0 ]; then
	echo "fuzz: no fuzz targets found" >&2
	exit 1
fi
echo "fuzz: $found targets passed"
