#!/usr/bin/env bash
# check-tracked: the repository holds source. Fail when git tracks a built
# binary (an ELF, Mach-O or PE file) or any file over 1 MiB, so build output
# cannot creep back in (a stale provisionctl binary once sat at the root).
set -euo pipefail
cd "$(dirname "$0")/.."
git rev-parse --git-dir >/dev/null 2>&1 || { echo "check-tracked: not a git checkout, skipped"; exit 0; }
fail=0
while IFS= read -r -d '' f; do
  [[ -f $f ]] || continue
  size=$(stat -c %s -- "$f")
  if (( size > 1048576 )); then
    echo "check-tracked: $f is $size bytes (over 1 MiB): build output or data does not belong in git"; fail=1
    continue
  fi
  magic=$(head -c 4 -- "$f" | od -An -tx1 | tr -d ' \n')
  case $magic in
    7f454c46|cffaedfe|cefaedfe|feedfacf|feedface|4d5a*)
      echo "check-tracked: $f is a built binary: remove it (git rm --cached) and let .gitignore cover it"; fail=1 ;;
  esac
done < <(git ls-files -z)
exit $fail
