#!/usr/bin/env bash
# Runs every Go fuzz target in the module for FUZZTIME each (default 60s):
# `make fuzz`, part of `make test`. Targets are found by their names in
# *_test.go files, so a new one runs without being listed here. A failing
# input is written under the package's testdata/fuzz and fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${1:-${FUZZTIME:-60s}}
go=${GO:-go}
found=0
while IFS= read -r file; do
	dir=./$(dirname "$file")
	while IFS= read -r name; do
		found=$((found + 1))
		echo "fuzz: $dir $name for $fuzztime"
		"$go" test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$dir"
	done < <(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$file")
done < <(git ls-files '*_test.go' | xargs grep -l '^func Fuzz' | sort)
if [ "$found" -eq 0 ]; then
	echo "fuzz: no fuzz targets found" >&2
	exit 1
fi
echo "fuzz: $found targets passed"
