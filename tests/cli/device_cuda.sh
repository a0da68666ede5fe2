#!/usr/bin/env bash
# device_cuda.sh TIEPOINT PROBLEM: `ba --device cuda` solves where a GPU is usable, and
# otherwise fails with exit code 3 and a message pointing to --device cpu.
set -u
tp=$1; problem=$2
if "$tp" version | grep -q "^cuda device"; then
  "$tp" ba "$problem" --device cuda --quiet | grep -q "termination: CONVERGENCE" && exit 0
  echo "ba --device cuda did not converge on a machine with a GPU"; exit 1
fi
err=$("$tp" ba "$problem" --device cuda --quiet 2>&1 >/dev/null); rc=$?
[ "$rc" = 3 ] || { echo "exit code $rc, expected 3: $err"; exit 1; }
echo "$err" | grep -q -- "--device cpu" || { echo "message lacks --device cpu: $err"; exit 1; }
"$tp" ba "$problem" --device cuda --solver cholmod --quiet > /dev/null 2>&1; rc=$?
[ "$rc" = 2 ] || { echo "--device cuda --solver cholmod: exit code $rc, expected 2"; exit 1; }
echo ok
