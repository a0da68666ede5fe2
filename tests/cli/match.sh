#!/usr/bin/env bash
# match.sh TIEPOINT IMAGE OUTDIR: `tiepoint match` end to end on features of IMAGE matched
# against an identical copy (every match must pair a keypoint with itself at distance 0):
# files per pair, text and SVG, summary.json, sequential and listed pairs, and --device cuda
# (byte-identical .tpmatch where a GPU is usable, else exit 3 naming --device cpu and no
# output).
set -u
tp=$1; image=$2; out=$3
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$out"; mkdir -p "$out/f"
"$tp" extract "$image" -o "$out/x" --quiet > /dev/null || fail "extract"
name=$(basename "$image")
for s in a b c; do cp "$out/x/$name.tpfeat" "$out/f/$s.tpfeat"; done
"$tp" match "$out/f/a.tpfeat" "$out/f/b.tpfeat" -o "$out/m" --txt --svg --quiet > "$out/log" \
  || fail "match: $(cat "$out/log")"
[ -s "$out/m/a--b.tpmatch" ] || fail "no a--b.tpmatch"
[ -s "$out/m/a--b.svg" ] || fail "no a--b.svg"
[ -s "$out/m/summary.json" ] || fail "no summary.json"
grep -q '"matches"' "$out/m/summary.json" || fail "summary without matches"
n=$(grep -vc '^#' "$out/m/a--b.txt")
[ "$n" -gt 10 ] || fail "only $n matches between identical feature sets"
awk '!/^#/ && ($1 != $2 || $3 != 0) { bad = 1 } END { exit bad }' "$out/m/a--b.txt" \
  || fail "a match pairs different keypoints or has a non-zero distance"
# Sequential pairs: a-b, b-c (not a-c).
"$tp" match "$out/f/a.tpfeat" "$out/f/b.tpfeat" "$out/f/c.tpfeat" --pairs sequential:1 \
  -o "$out/s" --quiet > /dev/null || fail "sequential:1"
[ -e "$out/s/a--b.tpmatch" ] && [ -e "$out/s/b--c.tpmatch" ] && [ ! -e "$out/s/a--c.tpmatch" ] \
  || fail "sequential:1 pairs: $(ls "$out/s")"
# A pair list by stem.
printf 'c a  # comment\n' > "$out/pairs.txt"
"$tp" match "$out/f/a.tpfeat" "$out/f/b.tpfeat" "$out/f/c.tpfeat" --pairs "$out/pairs.txt" \
  -o "$out/p" --quiet > /dev/null || fail "pair list"
[ -e "$out/p/c--a.tpmatch" ] && [ "$(ls "$out/p" | wc -l)" = 2 ] || fail "pair list: $(ls "$out/p")"
# Feature files of images (view_000.png.tpfeat) by their images' file names or stems.
mkdir -p "$out/f2"; cp "$out/f/a.tpfeat" "$out/f2/view_000.png.tpfeat"; cp "$out/f/b.tpfeat" "$out/f2/view_001.png.tpfeat"
printf 'view_000 view_001.png
' > "$out/pairs2.txt"
"$tp" match "$out/f2/view_000.png.tpfeat" "$out/f2/view_001.png.tpfeat" --pairs "$out/pairs2.txt" \
  -o "$out/p2" --quiet > /dev/null || fail "pair list by image names"
[ -e "$out/p2/view_000.png--view_001.png.tpmatch" ] || fail "pair list by image names: $(ls "$out/p2")"
# Verification runs and records the model.
"$tp" match "$out/f/a.tpfeat" "$out/f/b.tpfeat" --verify homography -o "$out/v" --txt --quiet \
  > /dev/null || fail "--verify homography"
grep -q "model homography" "$out/v/a--b.txt" || fail "no model in the text file"
# Essential verification reports the rotation's uncertainty per pair (null here: identical
# images have no baseline, so no pose is found).
printf '* 100 100 48 40\n' > "$out/intrinsics.txt"
"$tp" match "$out/f/a.tpfeat" "$out/f/b.tpfeat" --verify essential --intrinsics "$out/intrinsics.txt" \
  -o "$out/e" --quiet > /dev/null || fail "--verify essential"
grep -q '"rotation_uncertainty_deg": null' "$out/e/summary.json" \
  || fail "summary lacks a null rotation_uncertainty_deg: $(grep uncertainty "$out/e/summary.json")"
# CUDA: identical bytes, or exit 3 without output.
if "$tp" version | grep -q "^cuda device"; then
  "$tp" match "$out/f/a.tpfeat" "$out/f/b.tpfeat" --mutual --device cuda -o "$out/g" --quiet \
    > /dev/null || fail "--device cuda"
  "$tp" match "$out/f/a.tpfeat" "$out/f/b.tpfeat" --mutual --device cpu -o "$out/c" --quiet \
    > /dev/null || fail "--device cpu"
  cmp "$out/g/a--b.tpmatch" "$out/c/a--b.tpmatch" || fail "cuda and cpu match files differ"
else
  err=$("$tp" match "$out/f/a.tpfeat" "$out/f/b.tpfeat" --device cuda -o "$out/g" 2>&1 >/dev/null); rc=$?
  [ "$rc" = 3 ] || fail "--device cuda without a GPU: exit $rc, expected 3: $err"
  echo "$err" | grep -q -- "--device cpu" || fail "message lacks --device cpu: $err"
  [ -e "$out/g/a--b.tpmatch" ] && fail "output written although the device is unavailable"
fi
echo ok
