#!/usr/bin/env bash
# extract_cuda.sh TIEPOINT IMAGE OUTDIR: `extract --device cuda` writes features where a GPU
# is usable, and otherwise fails with exit code 3, a message pointing to --device cpu and
# no output file.
set -u
tp=$1; image=$2; out=$3
name=$(basename "$image")
rm -rf "$out"
if "$tp" version | grep -q "^cuda device"; then
  "$tp" extract "$image" --device cuda -o "$out" --quiet > /dev/null || { echo "extract --device cuda failed"; exit 1; }
  [ -s "$out/$name.tpfeat" ] || { echo "no $out/$name.tpfeat"; exit 1; }
  echo ok; exit 0
fi
err=$("$tp" extract "$image" --device cuda -o "$out" --quiet 2>&1 >/dev/null); rc=$?
[ "$rc" = 3 ] || { echo "exit code $rc, expected 3: $err"; exit 1; }
echo "$err" | grep -q -- "--device cpu" || { echo "message lacks --device cpu: $err"; exit 1; }
[ -e "$out/$name.tpfeat" ] && { echo "output written although the device is unavailable"; exit 1; }
echo ok
