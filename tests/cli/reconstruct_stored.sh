#!/usr/bin/env bash
# reconstruct_stored.sh TIEPOINT SFM_EVAL OUTDIR: `tiepoint reconstruct --features DIR
# [--matches DIR]` on what `tiepoint extract` and `tiepoint match` wrote for a scene tiepoint
# renders itself (known cameras), and the bad-input cases of those folders.
set -u
tp=$1; eval_bin=$2; d=$3
rm -rf "$d"; mkdir -p "$d"
fail() { echo "FAIL: $*"; exit 1; }
"$tp" render-scene -o "$d/scene" --views 8 --width 640 --height 480 >/dev/null || fail "render-scene"
imgs=("$d"/scene/*.png)
[ ${#imgs[@]} = 8 ] || fail "expected 8 rendered views, got ${#imgs[@]}"
"$tp" extract "${imgs[@]}" -o "$d/feat" --quiet > /dev/null || fail "extract"
"$tp" match "$d"/feat/*.tpfeat -o "$d/match" --quiet > /dev/null || fail "match"
"$tp" match "$d"/feat/*.tpfeat -o "$d/verified" --verify fundamental --quiet > /dev/null || fail "match --verify"

# The model agrees with the rendering cameras, and the report says where the
# correspondences came from. check OUT MATCHES_DIR|-
check() {
  [ -s "$1/sparse/0/cameras.bin" ] && [ -s "$1/points.ply" ] || fail "$1: no model written"
  "$eval_bin" "$1/sparse/0" --gt-par "$d/scene/scene_par.txt" > "$1.eval.json" || fail "sfm_eval on $1"
  python3 - "$1.eval.json" "$1/report.json" "$d/feat" "$2" <<'PY' || fail "$1: model or report wrong"
import json, sys
e = json.load(open(sys.argv[1])); r = json.load(open(sys.argv[2]))
st = r["stages"]
print(sys.argv[2], "registered", e["registered"], "median rotation error", e["aligned"]["median_rotation_error_deg"],
      "features from", st["extract"].get("read_from"), "matches from", st["match"].get("read_from"))
ok = e["registered"] == 8 and e["aligned"]["median_rotation_error_deg"] < 0.5 \
     and st["extract"].get("read_from") == sys.argv[3]
if sys.argv[4] == "-":
    ok = ok and "read_from" not in st["match"]
else:
    ok = ok and st["match"].get("read_from") == sys.argv[4] and st["match"]["files_read"] == 28 \
         and st["match"]["pairs_without_file"] == 0
sys.exit(0 if ok else 1)
PY
}

# 1. Features and matches from the folders, images found through --image-path.
"$tp" reconstruct --features "$d/feat" --matches "$d/match" --image-path "$d/scene" -o "$d/rec1" --single-camera -q \
  > /dev/null 2> "$d/err1" || { cat "$d/err1"; fail "reconstruct --features --matches exited $?"; }
check "$d/rec1" "$d/match"
# 2. The matches of `match --verify`: its inliers, verified again.
"$tp" reconstruct --features "$d/feat" --matches "$d/verified" --image-path "$d/scene" -o "$d/rec2" --single-camera -q \
  > /dev/null 2> "$d/err2" || { cat "$d/err2"; fail "reconstruct with verified matches exited $?"; }
check "$d/rec2" "$d/verified"
python3 - "$d/rec2/report.json" "$d/rec1/report.json" <<'PY' || fail "verified pairs not counted, or more than their inliers taken"
import json, sys
m = json.load(open(sys.argv[1]))["stages"]["match"]
all_matches = json.load(open(sys.argv[2]))["stages"]["match"]["matches"]
print("candidates: verified files' inliers", m["matches"], "all matches", all_matches)
sys.exit(0 if m["pairs_verified_in_files"] + m["pairs_rejected_in_files"] == 28 and m["pairs_verified_in_files"] > 0
         and 0 < m["matches"] < all_matches else 1)
PY
# 3. Features only, images named: the pipeline matches them itself.
"$tp" reconstruct "${imgs[@]}" --features "$d/feat" -o "$d/rec3" --single-camera -q > /dev/null 2> "$d/err3" \
  || { cat "$d/err3"; fail "reconstruct --features with images exited $?"; }
check "$d/rec3" -

# 3b. `extract` with reconstruct's settings gives reconstruct's features, images of little
# contrast included: on a rendering at contrast 0.1, where SIFT at the default threshold
# finds nothing and every image is extracted at lower thresholds and given the fallback's
# features, reconstruct --features makes byte for byte the model reconstruct makes from the
# images.
"$tp" render-scene -o "$d/low" --views 8 --width 640 --height 480 --contrast 0.1 -q > /dev/null || fail "render-scene --contrast"
"$tp" extract "$d/low/view_000.png" -o "$d/low_plain" --quiet | grep -q ", 0 features," || fail "the low-contrast view has features"
"$tp" extract "$d/low" --upsample --max-image-size 3200 --max-features 8192 --min-features 500 -o "$d/low_feat" --quiet \
  > "$d/low_extract.txt" || fail "extract --min-features"
[ "$(grep -Ec " features at contrast threshold 0\.00(5|25)," "$d/low_extract.txt")" = 8 ] \
  || { cat "$d/low_extract.txt"; fail "extract --min-features: not every view below 0.01 (the fallback)"; }
"$tp" reconstruct "$d/low" --single-camera -o "$d/low_rec" -q > /dev/null || fail "reconstruct of the low-contrast views"
python3 -c 'import json, sys; sys.exit(0 if json.load(open(sys.argv[1]))["stages"]["extract"]["images_given_more_features"] == 8 else 1)' \
  "$d/low_rec/report.json" || fail "reconstruct did not give every low-contrast view more features"
"$tp" reconstruct --features "$d/low_feat" --image-path "$d/low" --single-camera -o "$d/low_rec2" -q > /dev/null \
  || fail "reconstruct --features of extract --min-features"
for f in cameras.txt images.txt points3D.txt; do
  cmp -s "$d/low_rec/sparse/0/$f" "$d/low_rec2/sparse/0/$f" || fail "extract --min-features: another $f than reconstruct's"
done

# 3c. --mask-path (COLMAP's mask_path): MASKS/<image name>.png, black where no feature may
# be. Views 0-6 are masked on their left half, view 7 has no mask (said, and kept whole).
mkdir -p "$d/masks"
python3 - "$d/masks" <<'PY' || fail "writing the masks"
import sys
w, h = 640, 480
row = bytes([0] * (w // 2) + [255] * (w // 2))
for i in range(7):
    open("%s/view_%03d.png.png" % (sys.argv[1], i), "wb").write(b"P5\n%d %d\n255\n" % (w, h) + row * h)
PY
"$tp" reconstruct "$d/scene" --mask-path "$d/masks" --single-camera -o "$d/masked" -q > /dev/null 2> "$d/err_mask" \
  || { cat "$d/err_mask"; fail "reconstruct --mask-path exited $?"; }
grep -q "1 of 8 images have no mask in $d/masks (such as $d/masks/view_007.png.png)" "$d/err_mask" \
  || { cat "$d/err_mask"; fail "the image without a mask is not said"; }
python3 - "$d/masked" <<'PY' || fail "--mask-path: features on black pixels, or the report"
import json, sys
r = json.load(open(sys.argv[1] + "/report.json"))
lines = [l for l in open(sys.argv[1] + "/sparse/0/images.txt").read().splitlines() if l and not l.startswith("#")]
left = {}
for image, points in zip(lines[0::2], lines[1::2]):
    v = points.split()
    left[image.split()[-1]] = sum(1 for i in range(0, len(v), 3) if float(v[i]) < 320)
print("features masked", r["stages"]["extract"]["features_masked"], "points2D left of x = 320:", left)
ok = r["stages"]["read"]["images_without_mask"] == 1 and r["stages"]["extract"]["features_masked"] > 1000 \
     and all(left[n] == 0 for n in left if n != "view_007.png") and left.get("view_007.png", 0) > 100 \
     and r["models"][0]["registered_images"] == 8
sys.exit(0 if ok else 1)
PY
# extract with reconstruct's settings and the same masks: reconstruct's model, byte for byte.
"$tp" extract "$d/scene" --upsample --max-image-size 3200 --max-features 8192 --min-features 500 --mask-path "$d/masks" \
  -o "$d/masked_feat" --quiet > "$d/masked_extract.txt" 2> /dev/null || fail "extract --mask-path"
grep -q "view_000.png: 640 x 480, [0-9]* features, [0-9]* masked," "$d/masked_extract.txt" \
  || { cat "$d/masked_extract.txt"; fail "extract --mask-path: no masked count"; }
"$tp" reconstruct --features "$d/masked_feat" --image-path "$d/scene" --single-camera -o "$d/masked2" -q > /dev/null \
  || fail "reconstruct --features of extract --mask-path"
for f in cameras.txt images.txt points3D.txt; do
  cmp -s "$d/masked/sparse/0/$f" "$d/masked2/sparse/0/$f" || fail "extract --mask-path: another $f than reconstruct's"
done

# 4. Bad input: exit 2 with a message naming what is wrong, and no sparse/.
x() { "$(dirname "$0")/expect.sh" "$@" || fail "case above"; }
x 2 "requires --features" "$d/bad/sparse" -- \
  "$tp" reconstruct "${imgs[@]}" --matches "$d/match" -o "$d/bad" -q
x 2 "excludes|--tracks" "$d/bad/sparse" -- \
  "$tp" reconstruct "${imgs[@]}" --features "$d/feat" --tracks "$d/none.txt" -o "$d/bad" -q
x 2 "--image-path DIR" "$d/bad/sparse" -- "$tp" reconstruct --features "$d/feat" -o "$d/bad" -q
x 2 "--features $d/nowhere: no such directory" "$d/bad/sparse" -- \
  "$tp" reconstruct --features "$d/nowhere" --image-path "$d/scene" -o "$d/bad" -q
# A truncated features file.
cp -r "$d/feat" "$d/feat_trunc"
first=$(basename "${imgs[0]}")
head -c 100 "$d/feat/$first.tpfeat" > "$d/feat_trunc/$first.tpfeat"
x 2 "$first.tpfeat" "$d/bad/sparse" -- \
  "$tp" reconstruct --features "$d/feat_trunc" --matches "$d/match" --image-path "$d/scene" -o "$d/bad" -q
# A missing features file for an image named.
rm "$d/feat_trunc/$first.tpfeat"
x 2 "$first.tpfeat.*no features file" "$d/bad/sparse" -- \
  "$tp" reconstruct "${imgs[@]}" --features "$d/feat_trunc" -o "$d/bad" -q
# The wrong matches folder (the features'): no pair has a file.
x 2 "no matches file for any of the 28 pairs" "$d/bad/sparse" -- \
  "$tp" reconstruct --features "$d/feat" --matches "$d/feat" --image-path "$d/scene" -o "$d/bad" -q
# An image missing from --image-path.
mkdir -p "$d/some"; cp "${imgs[@]:1}" "$d/some/"
x 2 "no image '$first'" "$d/bad/sparse" -- \
  "$tp" reconstruct --features "$d/feat" --matches "$d/match" --image-path "$d/some" -o "$d/bad" -q
# Matches of other features (extracted again with fewer keypoints).
"$tp" extract "${imgs[@]}" -o "$d/feat_few" --max-features 100 --quiet > /dev/null || fail "extract --max-features"
x 2 "not of these features" "$d/bad/sparse" -- \
  "$tp" reconstruct --features "$d/feat_few" --matches "$d/match" --image-path "$d/scene" -o "$d/bad" -q
# Features extracted again with the same cap (so the same counts) since the matching: the
# matches' stored descriptor distances give it away.
"$tp" extract "${imgs[@]}" -o "$d/feat_cap" --max-features 500 --quiet > /dev/null || fail "extract cap"
"$tp" match "$d"/feat_cap/*.tpfeat -o "$d/match_cap" --quiet > /dev/null || fail "match cap"
"$tp" extract "${imgs[@]}" -o "$d/feat_cap2" --max-features 500 --upsample --quiet > /dev/null || fail "extract cap again"
x 2 "extracted again" "$d/bad/sparse" -- \
  "$tp" reconstruct --features "$d/feat_cap2" --matches "$d/match_cap" --image-path "$d/scene" -o "$d/bad" -q
# Features of other images (keypoints outside a smaller image).
"$tp" render-scene -o "$d/small" --views 8 --width 320 --height 240 > /dev/null || fail "render-scene small"
x 2 "outside image" "$d/bad/sparse" -- \
  "$tp" reconstruct --features "$d/feat" --matches "$d/match" --image-path "$d/small" -o "$d/bad" -q
# --camera-mask (COLMAP's camera_mask_path): one mask for every image, here black on the top
# half: no points2D above y = 240; with --mask-path both apply. One of another size: exit 2
# naming it and the image.
python3 -c 'import sys; open(sys.argv[1], "wb").write(b"P5\n640 480\n255\n" + bytes(640 * 240) + bytes([255]) * 640 * 240)' \
  "$d/top.pgm"
"$tp" reconstruct "$d/scene" --camera-mask "$d/top.pgm" --mask-path "$d/masks" --single-camera -o "$d/cammask" -q \
  > /dev/null 2>&1 || fail "reconstruct --camera-mask exited $?"
python3 - "$d/cammask/sparse/0/images.txt" <<'PY' || fail "--camera-mask: points2D on its black half"
import sys
lines = [l for l in open(sys.argv[1]).read().splitlines() if l and not l.startswith("#")]
top = left = 0
for image, points in zip(lines[0::2], lines[1::2]):
    v = points.split()
    top += sum(1 for i in range(1, len(v), 3) if float(v[i]) < 240)
    if image.split()[-1] != "view_007.png":
        left += sum(1 for i in range(0, len(v), 3) if float(v[i]) < 320)
print("points2D above y = 240:", top, "left of x = 320 in the masked views:", left, "images:", len(lines) // 2)
sys.exit(0 if top == 0 and left == 0 and len(lines) // 2 >= 2 else 1)
PY
python3 -c 'import sys; open(sys.argv[1], "wb").write(b"P5\n320 240\n255\n" + bytes([255]) * 320 * 240)' "$d/small.pgm"
x 2 "small.pgm: mask of 320 x 240 pixels for an image of 640 x 480 .view_000.png." "$d/badmask5/sparse" -- \
  "$tp" reconstruct "$d/scene" --camera-mask "$d/small.pgm" -o "$d/badmask5" -q
x 2 "small.pgm: mask of 320 x 240 pixels for an image of 640 x 480" "$d/badmask6/view_000.png.tpfeat" -- \
  "$tp" extract "$d/scene" --camera-mask "$d/small.pgm" -o "$d/badmask6" --quiet

# Masks: one of another size (named, before any extraction), a folder that is not one,
# and --mask-path where nothing is extracted.
mkdir -p "$d/badmasks"
python3 -c 'import sys; open(sys.argv[1], "wb").write(b"P5\n320 240\n255\n" + bytes([255]) * 320 * 240)' \
  "$d/badmasks/view_003.png.png"
x 2 "view_003.png.png: mask of 320 x 240 pixels for an image of 640 x 480" "$d/badmask/sparse" -- \
  "$tp" reconstruct "$d/scene" --mask-path "$d/badmasks" -o "$d/badmask" -q
x 2 "nosuch: not a folder" "$d/badmask2/sparse" -- \
  "$tp" reconstruct "$d/scene" --mask-path "$d/nosuch" -o "$d/badmask2" -q
x 2 "--mask-path applies to the features reconstruct extracts, not to those of --features" "$d/badmask3/sparse" -- \
  "$tp" reconstruct --features "$d/feat" --image-path "$d/scene" --mask-path "$d/masks" -o "$d/badmask3" -q
x 2 "view_003.png.png: mask of 320 x 240" "$d/badmask4/view_003.png.tpfeat" -- \
  "$tp" extract "$d/scene" --mask-path "$d/badmasks" -o "$d/badmask4" --quiet
echo ok
