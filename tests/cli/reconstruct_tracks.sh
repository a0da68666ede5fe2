#!/usr/bin/env bash
# reconstruct_tracks.sh TIEPOINT SFM_EVAL OUTDIR: `tiepoint reconstruct --tracks` (sequence
# mode) on frames tiepoint renders itself: 8 views over a 20-degree arc (steps of about 3
# degrees, small enough for LK), tracked by `tiepoint track`, then mapped with the rendering
# intrinsics and self-calibrated. Frame to frame, the model must agree with the rendering
# cameras within the issue's KITTI bounds (rotation 0.1 deg, direction of travel 2 deg);
# the centres, on so short an arc, fix the alignment's rotation about the arc's chord only
# weakly, so the check is on consecutive and pairwise relative poses. Then the tracks
# file's bad inputs: each exits 2 with a message naming the file, and writes no sparse/.
set -u
tp=$1; eval_bin=$2; d=$3
rm -rf "$d"; mkdir -p "$d"
fail() { echo "FAIL: $*"; exit 1; }
"$tp" render-scene -o "$d/seq" --views 8 --arc 20 --width 640 --height 480 -q || fail "render-scene"
frames=("$d"/seq/*.png)
[ ${#frames[@]} = 8 ] || fail "expected 8 rendered frames, got ${#frames[@]}"
"$tp" track "${frames[@]}" -o "$d/tracks.txt" -q || fail "track exited $?"

check() {  # check NAME: the model of run NAME against the rendering cameras
  "$eval_bin" "$d/$1/sparse/0" --gt-par "$d/seq/scene_par.txt" > "$d/$1.eval.json" || fail "$1: sfm_eval could not read the model"
  python3 - "$d/$1.eval.json" "$d/$1/report.json" "$1" <<'PY' || fail "$1: model disagrees with the rendering cameras"
import json, sys
e = json.load(open(sys.argv[1])); r = json.load(open(sys.argv[2]))
c = e["consecutive"]
print(sys.argv[3], "registered", e["registered"], "consecutive rotation max", round(c["max_rotation_error_deg"], 4),
      "direction max", round(c["max_translation_direction_error_deg"], 3),
      "pairwise median", round(e["pairwise"]["median_relative_rotation_error_deg"], 4),
      "observations read", r["stages"]["tracks_file"]["observations"])
ok = (e["registered"] == 8 and len(r["models"]) == 1 and c["max_rotation_error_deg"] <= 0.1
      and c["max_translation_direction_error_deg"] <= 2.0
      and e["pairwise"]["median_relative_rotation_error_deg"] <= 0.1
      and r["stages"]["tracks_file"]["observations"] > 1000)
sys.exit(0 if ok else 1)
PY
}

# 1. With the rendering intrinsics, and self-calibrated (one camera).
"$tp" reconstruct --tracks "$d/tracks.txt" "${frames[@]}" -o "$d/known" --pairs sequential:3 \
  --intrinsics "$d/seq/scene_par.txt" -q > "$d/stdout" 2> "$d/stderr" || { cat "$d/stderr"; fail "reconstruct (intrinsics) exited"; }
check known
"$tp" reconstruct --tracks "$d/tracks.txt" "${frames[@]}" -o "$d/self" --pairs sequential:3 \
  --single-camera -q > "$d/stdout" 2> "$d/stderr" || { cat "$d/stderr"; fail "reconstruct (self-calibrated) exited"; }
check self

# 2. Bad tracks files: exit 2, the file named, no sparse/.
bad() {  # bad NAME PATTERN: reconstruct with the tracks file NAME must fail so
  rm -rf "$d/bad"
  "$tp" reconstruct --tracks "$1" "${frames[@]}" -o "$d/bad" -q > "$d/stdout" 2> "$d/stderr"
  rc=$?
  [ $rc = 2 ] || { cat "$d/stderr"; fail "$1: exit $rc, expected 2"; }
  grep -Eq "$2" "$d/stderr" || { cat "$d/stderr"; fail "$1: message does not match '$2'"; }
  [ -e "$d/bad" ] && fail "$1: the output folder was left behind"
  return 0
}
line() { printf '%s\n' "$2" > "$d/$1"; head -n 50 "$d/tracks.txt" >> "$d/$1"; }
line frame_range.txt "0 8 100 100"
bad "$d/frame_range.txt" "frame_range.txt: frame 8 is not among the 8 images given"
line nan.txt "0 0 nan 100"
bad "$d/nan.txt" "nan.txt:1: x and y must be finite"
line outside.txt "999999 3 640 100"
bad "$d/outside.txt" "outside.txt: track 999999 in frame 3 at \(640, 100\) lies outside image 'view_003.png' \(640 x 480\)"
line negative.txt "999999 0 -0.51 100"
bad "$d/negative.txt" "negative.txt: track 999999 in frame 0 .* lies outside image"
line twice.txt "5 0 10 10
5 0 11 11"
bad "$d/twice.txt" "twice.txt:2: track 5 appears twice in frame 0"
line short.txt "1 2 3"
bad "$d/short.txt" "short.txt:1: expected 'track_id frame x y'"
: > "$d/empty.txt"
bad "$d/empty.txt" "empty.txt: no observations"
printf '# only a comment\n' > "$d/comment.txt"
bad "$d/comment.txt" "comment.txt: no observations"
mkdir -p "$d/adir"
bad "$d/adir" "adir: is a directory"
bad "$d/missing.txt" "missing.txt: cannot open for reading \(No such file"
line beyond.txt "999999 0 639.6 100"
bad "$d/beyond.txt" "beyond.txt: track 999999 in frame 0 at \(639.6, 100\) lies outside image"
# Points on the outer pixel edges (-0.5 and size - 0.5) are inside the image: with them added
# to the whole tracks file (tracks of their own, one view each) the model comes out as before.
{ cat "$d/tracks.txt"; printf '999998 0 -0.5 -0.5\n999999 0 639.5 479.5\n'; } > "$d/edge.txt"
rm -rf "$d/edge"
"$tp" reconstruct --tracks "$d/edge.txt" "${frames[@]}" -o "$d/edge" --pairs sequential:3 \
  --intrinsics "$d/seq/scene_par.txt" -q > "$d/stdout" 2> "$d/stderr" || { cat "$d/stderr"; fail "points on the pixel edges were refused"; }
[ -s "$d/edge/sparse/0/images.bin" ] || fail "edge: no model"
echo "PASS"
