#!/usr/bin/env bash
# extract_batch.sh TIEPOINT WORKDIR GOOD_IMAGE BAD_IMAGE: a batch of good, bad, missing
# and duplicate-named images. The good ones are written (binary and text, readable and
# consistent), the others are listed on stderr with no output, and the exit code is 2.
set -u
tp=$1; dir=$2; good=$3; bad=$4
rm -rf "$dir"; mkdir -p "$dir/copy"
cp "$good" "$dir/copy/"
name=$(basename "$good")
"$tp" extract "$good" "$bad" "$dir/missing.jpg" "$dir/copy/$name" --txt --threads 2 \
  -o "$dir/out" >"$dir/stdout" 2>"$dir/stderr"
rc=$?
fail() { echo "FAIL: $*"; echo "--- stdout"; cat "$dir/stdout"; echo "--- stderr"; cat "$dir/stderr"; exit 1; }
[ "$rc" = 2 ] || fail "exit code $rc, expected 2"
[ -s "$dir/out/$name.tpfeat" ] || fail "missing $name.tpfeat"
[ -s "$dir/out/$name.txt" ] || fail "missing $name.txt"
[ "$(head -c 8 "$dir/out/$name.tpfeat")" = "TPFEAT01" ] || fail "bad magic"
badname=$(basename "$bad")
[ ! -e "$dir/out/$badname.tpfeat" ] || fail "output written for the bad image"
ls "$dir/out" | grep -q "tmp-" && fail "temporary left behind"
grep -q "3 of 4 images failed" "$dir/stderr" || fail "no failure summary"
grep -q "$badname" "$dir/stderr" || fail "bad image not named"
grep -q "missing.jpg" "$dir/stderr" || fail "missing image not named"
grep -q "would overwrite the features of $good" "$dir/stderr" || fail "duplicate name not reported"
# Per-image line: size, count and time; the text header agrees with the binary's size.
count=$(awk '{print $1; exit}' "$dir/out/$name.txt")
grep -Eq "$name: 96 x 80, $count features, [0-9.]+ s" "$dir/stdout" || fail "no per-image line"
[ "$count" -gt 0 ] || fail "no features in the test image"
size=$(stat -c %s "$dir/out/$name.tpfeat")
[ "$size" = $((24 + count * 144)) ] || fail "binary size $size does not match $count features"
lines=$(wc -l < "$dir/out/$name.txt")
[ "$lines" = $((count + 1)) ] || fail "text has $lines lines for $count features"
echo "batch ok: $count features, 3 failures reported"
