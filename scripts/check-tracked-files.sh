#!/usr/bin/env bash
# Fails when git tracks a file that must not be in the repository: an ELF
# binary (anything built belongs in bin/, which is ignored) or a file over
# 1 MiB. Generated protobuf code (*.pb.go) may be large; it is reproducible
# with `make generate` and checked by check-generate.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"

limit=$((1024 * 1024))
bad=0
while IFS= read -r -d '' f; do
	[ -f "$f" ] && [ ! -L "$f" ] || continue # deleted in the work tree, or a symlink
	if [ "$(head -c 4 -- "$f" | od -An -tx1 | tr -d ' \n')" = 7f454c46 ]; then
		echo "error: $f is an ELF binary; build it into bin/ instead of committing it" >&2
		bad=1
		continue
	fi
	case "$f" in *.pb.go) continue ;; esac
	size=$(stat -c %s -- "$f")
	if [ "$size" -gt "$limit" ]; then
		echo "error: $f is $size bytes (limit $limit); large files do not belong in git" >&2
		bad=1
	fi
done < <(git ls-files -z)
exit "$bad"
