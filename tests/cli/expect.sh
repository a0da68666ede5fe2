#!/usr/bin/env bash
# expect.sh EXIT_CODE STDERR_REGEX NO_FILE... -- COMMAND...
# Runs COMMAND; passes when it exits with EXIT_CODE, its stderr matches STDERR_REGEX
# (extended regex; "" matches anything) and none of the NO_FILE paths exist afterwards
# (no partial output). Used by CTest for command-line behaviour.
set -u
want=$1; regex=$2; shift 2
files=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do files+=("$1"); shift; done
shift
for f in "${files[@]}"; do rm -f "$f"; done
err=$(mktemp)
"$@" >/dev/null 2>"$err"
got=$?
fail=0
if [ "$got" != "$want" ]; then echo "exit code $got, expected $want"; fail=1; fi
if [ -n "$regex" ] && ! grep -Eq -- "$regex" "$err"; then echo "stderr does not match /$regex/"; fail=1; fi
for f in "${files[@]}"; do
  if [ -e "$f" ]; then echo "output file $f exists but must not"; fail=1; fi
  if ls "$f".tmp-* >/dev/null 2>&1; then echo "temporary $f.tmp-* left behind"; fail=1; fi
done
if [ "$fail" != 0 ]; then echo "--- command: $*"; echo "--- stderr:"; cat "$err"; fi
rm -f "$err"
exit $fail
