#!/usr/bin/env bash
# track_sequence.sh TIEPOINT WORKDIR IMAGE: `tiepoint track` over three copies of one frame
# (nothing moves): every track of frame 0 is in frames 1 and 2 at the same place, lines are
# "track_id frame x y", one SVG per frame embedding the frame as a PNG. Then failures that
# must leave no output: a frame of another size (named, exit 2) and two frames whose SVGs
# would have the same name. --lk-affine-prediction off gives the same tracks here (nothing
# turns); a value other than on/off is named, exit 2, no output.
set -u
tp=$1; dir=$2; img=$3
rm -rf "$dir"; mkdir -p "$dir/b"
for i in 0 1 2; do cp "$img" "$dir/frame$i.pgm"; done
cp "$img" "$dir/b/frame0.pgm"
fail() { echo "FAIL: $*"; echo "--- stdout"; cat "$dir/stdout"; echo "--- stderr"; cat "$dir/stderr"; exit 1; }
# The frame is 96x80 (3 levels): 8x8 patches from level 2 keep new tracks 16 px from the
# border; the default 16x16 level-2 patch would keep them 32 px away, leaving few corners.
"$tp" track "$dir"/frame0.pgm "$dir"/frame1.pgm "$dir"/frame2.pgm --fast-threshold 10 \
  --lk-coarse-level 2 -o "$dir/tracks.txt" --svg "$dir/svg" >"$dir/stdout" 2>"$dir/stderr"
rc=$?
[ "$rc" = 0 ] || fail "exit code $rc, expected 0"
[ -s "$dir/tracks.txt" ] || fail "no tracks file"
awk '!/^#/ && NF != 4 {bad=1} END {exit bad}' "$dir/tracks.txt" || fail "a line is not 'track_id frame x y'"
n0=$(awk '!/^#/ && $2 == 0' "$dir/tracks.txt" | wc -l)
[ "$n0" -gt 0 ] || fail "no tracks in frame 0"
for f in 1 2; do
  diff <(awk -v f=0 '!/^#/ && $2 == f {print $1, $3, $4}' "$dir/tracks.txt") \
       <(awk -v f=$f '!/^#/ && $2 == f {print $1, $3, $4}' "$dir/tracks.txt") >/dev/null ||
    fail "frame $f does not repeat frame 0's tracks"
done
for i in 0 1 2; do
  s="$dir/svg/frame$i.pgm.svg"
  [ -s "$s" ] || fail "missing $s"
  grep -q "data:image/png;base64,iVBORw0KGgo" "$s" || fail "$s does not embed a PNG"
  [ "$(grep -c '<circle' "$s")" = "$n0" ] || fail "$s does not draw $n0 tracks"
done
grep -Eq "3 frames, $n0 tracks" "$dir/stdout" || fail "no summary line"
ls "$dir" "$dir/svg" | grep -q "tmp-" && fail "temporary left behind"

# --lk-affine-prediction off: the same tracks (nothing turns, no second pass ran).
"$tp" track "$dir"/frame0.pgm "$dir"/frame1.pgm "$dir"/frame2.pgm --fast-threshold 10 \
  --lk-coarse-level 2 --lk-affine-prediction off -o "$dir/tracks_off.txt" >"$dir/stdout" 2>"$dir/stderr"
rc=$?
[ "$rc" = 0 ] || fail "--lk-affine-prediction off: exit code $rc, expected 0"
diff "$dir/tracks.txt" "$dir/tracks_off.txt" >/dev/null || fail "--lk-affine-prediction off changed the tracks"
"$tp" track "$dir"/frame0.pgm "$dir"/frame1.pgm --lk-affine-prediction maybe -o "$dir/maybe.txt" \
  >"$dir/stdout" 2>"$dir/stderr"
rc=$?
[ "$rc" = 2 ] || fail "--lk-affine-prediction maybe: exit code $rc, expected 2"
grep -q "lk-affine-prediction 'maybe': expected on or off" "$dir/stderr" || fail "bad --lk-affine-prediction not explained"
[ ! -e "$dir/maybe.txt" ] || fail "output written for a bad option"

# A frame of another size: named, exit 2, no tracks file, no SVG.
printf 'P5\n40 30\n255\n' >"$dir/small.pgm"
head -c 1200 /dev/zero >>"$dir/small.pgm"
rm -rf "$dir/out"; mkdir "$dir/out"
"$tp" track "$dir/frame0.pgm" "$dir/small.pgm" -o "$dir/out/tracks.txt" --svg "$dir/out/svg" \
  >"$dir/stdout" 2>"$dir/stderr"
rc=$?
[ "$rc" = 2 ] || fail "size mismatch: exit code $rc, expected 2"
grep -q "small.pgm: frame 1 is 40x30, the sequence started at" "$dir/stderr" || fail "size mismatch not explained"
[ -z "$(ls -A "$dir/out")" ] || fail "output written for a failed run"

# --camera-mask (COLMAP's camera_mask_path), black on the frame's left half: no track point
# rounds to a pixel there, those on the right are as without it; one of another size is
# named, exit 2, no output.
python3 -c 'import sys; open(sys.argv[1], "wb").write(b"P5\n96 80\n255\n" + (bytes(48) + bytes([255]) * 48) * 80)' \
  "$dir/mask.pgm"
"$tp" track "$dir"/frame0.pgm "$dir"/frame1.pgm "$dir"/frame2.pgm --fast-threshold 10 --lk-coarse-level 2 \
  --camera-mask "$dir/mask.pgm" -o "$dir/masked.txt" >"$dir/stdout" 2>"$dir/stderr" || fail "track --camera-mask"
[ "$(awk '!/^#/ && int($3 + 0.5) < 48' "$dir/tracks.txt" | wc -l)" -gt 0 ] || fail "no points on the left half to mask"
left=$(awk '!/^#/ && int($3 + 0.5) < 48' "$dir/masked.txt" | wc -l)
[ "$left" = 0 ] || fail "track --camera-mask: $left points on its black half"
diff <(awk '!/^#/ && int($3 + 0.5) >= 48' "$dir/tracks.txt") <(awk '!/^#/' "$dir/masked.txt") >/dev/null \
  || fail "track --camera-mask: the points on its white half differ from those without it"
[ "$(awk '!/^#/' "$dir/masked.txt" | wc -l)" -gt 0 ] || fail "track --camera-mask: nothing left"
grep -q "track points on the black pixels of .*mask.pgm left out" "$dir/stdout" || fail "masked points not counted"
printf 'P5\n40 30\n255\n' >"$dir/mask_small.pgm"; head -c 1200 /dev/zero >>"$dir/mask_small.pgm"
"$tp" track "$dir"/frame0.pgm "$dir"/frame1.pgm --camera-mask "$dir/mask_small.pgm" -o "$dir/masked2.txt" \
  >"$dir/stdout" 2>"$dir/stderr"; rc=$?
[ "$rc" = 2 ] && grep -q "mask_small.pgm: mask of 40 x 30 pixels for an image of 96 x 80" "$dir/stderr" \
  && [ ! -e "$dir/masked2.txt" ] || fail "track --camera-mask of another size: exit $rc"

# Two frames whose SVGs would share a name.
"$tp" track "$dir/frame0.pgm" "$dir/b/frame0.pgm" -o "$dir/clash.txt" --svg "$dir/clash" \
  >"$dir/stdout" 2>"$dir/stderr"
rc=$?
[ "$rc" = 2 ] || fail "SVG name clash: exit code $rc, expected 2"
grep -q "would overwrite" "$dir/stderr" || fail "SVG name clash not explained"
[ ! -e "$dir/clash.txt" ] || fail "tracks written although the SVGs failed"
exit 0
