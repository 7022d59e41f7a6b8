#!/usr/bin/env bash
# Formats every C++ source of the project with clang-format 22 and the
# checked-in .clang-format; `--check` changes nothing and fails, listing the
# files, when any is not formatted (CI runs it).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
fmt=$(command -v clang-format-22 || true)
if [ -z "$fmt" ]; then
  echo "format: clang-format-22 not found (scripts/bootstrap.sh clang-format-22 installs it)" >&2
  exit 2
fi
mapfile -t files < <(git ls-files '*.cpp' '*.h' | grep -v '^tests/lit/')
if [ "${1:-}" = "--check" ]; then
  # A merge left half-done is not a formatting matter, but it is the same kind
  # of slip and this is the check every landing runs first.
  if git grep -nE '^(<<<<<<< |>>>>>>> )' -- . ':!tests/lit' >&2; then
    echo "format: unresolved merge conflict markers (above)" >&2
    exit 1
  fi
  bad=()
  for f in "${files[@]}"; do
    "$fmt" --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
  done
  if ((${#bad[@]})); then
    echo "format: ${#bad[@]} file(s) not formatted (run scripts/format.sh):" >&2
    printf '  %s\n' "${bad[@]}" >&2
    exit 1
  fi
  echo "format: ${#files[@]} files formatted"
else
  "$fmt" -i "${files[@]}"
fi
