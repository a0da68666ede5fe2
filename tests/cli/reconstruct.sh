#!/usr/bin/env bash
# reconstruct.sh TIEPOINT SFM_EVAL OUTDIR: `tiepoint reconstruct` end to end on a scene
# tiepoint renders itself (known cameras), and its bad-input behaviour.
set -u
tp=$1; eval_bin=$2; d=$3
rm -rf "$d"; mkdir -p "$d"
fail() { echo "FAIL: $*"; exit 1; }
"$tp" render-scene -o "$d/scene" --views 8 --width 640 --height 480 >/dev/null || fail "render-scene"
imgs=("$d"/scene/*.png)
[ ${#imgs[@]} = 8 ] || fail "expected 8 rendered views, got ${#imgs[@]}"

# 1. A model comes out, complete, and agrees with the cameras that rendered the images.
"$tp" reconstruct "${imgs[@]}" -o "$d/rec" --single-camera --no-upsample -q > "$d/stdout" 2> "$d/stderr" \
  || { cat "$d/stderr"; fail "reconstruct exited $?"; }
for f in sparse/0/cameras.txt sparse/0/images.txt sparse/0/points3D.txt sparse/0/cameras.bin \
         sparse/0/images.bin sparse/0/points3D.bin sparse/0/model.bal points.ply report.json overview.svg; do
  [ -s "$d/rec/$f" ] || fail "missing $f"
done
ls -a "$d/rec" | grep -q "tmp-reconstruct" && fail "temporary directory left behind"
"$eval_bin" "$d/rec/sparse/0" --gt-par "$d/scene/scene_par.txt" > "$d/eval.json" || fail "sfm_eval could not read the model"
python3 - "$d/eval.json" <<'PY' || exit 1
import json, sys
e = json.load(open(sys.argv[1]))
ok = e["registered"] == 8 and e["aligned"]["median_rotation_error_deg"] < 0.5 \
     and e["aligned"]["median_centre_error_fraction_of_extent"] < 0.01
print("registered", e["registered"], "median rotation error", e["aligned"]["median_rotation_error_deg"],
      "centre error", e["aligned"]["median_centre_error_fraction_of_extent"])
sys.exit(0 if ok else 1)
PY
[ $? = 0 ] || fail "model disagrees with the rendering cameras"
# The rendered scene is coloured: so are the points (COLMAP's points3D.txt: ID X Y Z R G B ...),
# and the PNGs have no EXIF, so the camera starts from the default focal length.
python3 - "$d/rec/sparse/0/points3D.txt" "$d/rec/report.json" <<'PY' || fail "points are grey or the focal source is wrong"
import json, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip() and not l.startswith("#")]
coloured = sum(1 for r in rows if len({r[4], r[5], r[6]}) > 1)
cams = json.load(open(sys.argv[2]))["cameras"]
print("points", len(rows), "coloured", coloured, "focal sources", [c["focal_source"] for c in cams])
sys.exit(0 if rows and coloured > 0.5 * len(rows) and [c["focal_source"] for c in cams] == ["default"]
            and abs(cams[0]["initial_focal_px"] - 1.2 * 640) < 1e-9 else 1)
PY
# The BAL export runs through `tiepoint ba` unchanged, starting at the model's own error.
"$tp" ba "$d/rec/sparse/0/model.bal" --max-iterations 3 --report "$d/ba.json" > /dev/null || fail "ba on model.bal"
python3 - "$d/ba.json" "$d/rec/report.json" <<'PY' || fail "BAL export does not reproduce the reprojection error"
import json, sys, math
ba = json.load(open(sys.argv[1])); rep = json.load(open(sys.argv[2]))
rms = math.sqrt(2 * ba["initial_cost"] / (2 * ba["num_observations"]))
mean = rep["models"][0]["mean_reprojection_error_px"]
print("BAL initial RMS per coordinate", rms, "model mean error", mean)
sys.exit(0 if rms < 2 * mean + 0.05 and ba["num_observations"] == rep["models"][0]["observations"] else 1)
PY

# 1b. The folder in place of its images (scene_par.txt in it is passed over): the same images
# in the same order, so the same model, byte for byte.
"$tp" reconstruct "$d/scene/" -o "$d/rec_dir" --single-camera --no-upsample -q > /dev/null 2> "$d/stderr_dir" \
  || { cat "$d/stderr_dir"; fail "reconstruct on the folder exited $?"; }
for f in cameras.txt images.txt points3D.txt; do
  cmp -s "$d/rec/sparse/0/$f" "$d/rec_dir/sparse/0/$f" || fail "the folder gave another $f than its images"
done

# 1c. A folder with subfolders, as a camera card or a rig lays photos out (file names that
# repeat across them; hidden files and folders, other files): the images are found in
# them, named in the model by their paths relative to the folder (as COLMAP names them), in
# the same order, so the same model but for the names; extract writes each image's
# features in the same subfolder, and reconstruct --features finds them there.
mkdir -p "$d/card/cam A" "$d/card/camB" "$d/card/.thumbs"
for i in 0 1 2 3; do
  cp "${imgs[$i]}" "$d/card/cam A/v$i.png"; cp "${imgs[$((i + 4))]}" "$d/card/camB/v$i.png"
done
printf 'junk' > "$d/card/.thumbs/v0.png"; printf 'junk' > "$d/card/camB/._v1.png"; cp "$d/scene/scene_par.txt" "$d/card/"
"$tp" reconstruct "$d/card" -o "$d/rec_card" --single-camera --no-upsample -q > /dev/null 2> "$d/stderr_card" \
  || { cat "$d/stderr_card"; fail "reconstruct on the folder with subfolders exited $?"; }
grep -q "skipping" "$d/stderr_card" && { cat "$d/stderr_card"; fail "a hidden file was read"; }
# COLMAP reads a text model's names up to a space: said (the binary model keeps them).
grep -q "warning: image names with spaces (such as 'cam A/v0.png')" "$d/stderr_card" || fail "no warning of the space"
grep -q "COLMAP reads the text model" "$d/rec_card/report.json" || fail "the report has no warning of the space"
for f in cameras.txt points3D.txt; do
  cmp -s "$d/rec/sparse/0/$f" "$d/rec_card/sparse/0/$f" || fail "the subfolders gave another $f"
done
python3 - "$d/rec/sparse/0/images.txt" "$d/rec_card/sparse/0/images.txt" <<'PY' || fail "images.txt of the subfolders"
import sys
a, b = (open(p).read().splitlines() for p in sys.argv[1:])
names = {"view_%03d.png" % i: ("cam A/v%d.png" if i < 4 else "camB/v%d.png") % (i % 4) for i in range(8)}
want = [" ".join(l.split(" ")[:9] + [names[l.split(" ")[9]]]) if l and not l.startswith("#") and len(l.split(" ")) == 10
        else l for l in a]
sys.exit(0 if want == b and sum(1 for l in b if l.endswith(".png")) == 8 else 1)
PY
"$tp" extract "$d/card" -o "$d/card_feat" --quiet > /dev/null || fail "extract on the folder with subfolders"
[ -s "$d/card_feat/cam A/v0.png.tpfeat" ] && [ -s "$d/card_feat/camB/v0.png.tpfeat" ] \
  && [ "$(find "$d/card_feat" -type f | wc -l)" = 8 ] || fail "extract's outputs are not in the images' subfolders"
"$tp" reconstruct --features "$d/card_feat" --image-path "$d/card" -o "$d/rec_card2" --single-camera -q > /dev/null \
  || fail "reconstruct --features of the subfolders"
grep -c "camB/v3.png" "$d/rec_card2/sparse/0/images.txt" | grep -q 1 || fail "--features: camB/v3.png not in the model"
# Their matches from `match FEATURES/`, which names its files by the images' paths in the
# folder, '/' as %2F: the file names repeat across the subfolders.
"$tp" match "$d/card_feat" --verify fundamental -o "$d/card_match" --quiet > /dev/null || fail "match of the subfolders' features"
[ -e "$d/card_match/cam A%2Fv0.png--camB%2Fv0.png.tpmatch" ] || { ls "$d/card_match"; fail "match: files not named by the paths"; }
# Its pairs file may name them by their paths in the folder, as reconstruct's does.
printf 'camB/v0.png camB/v1.png\n' > "$d/card_pairs.txt"
"$tp" match "$d/card_feat" --pairs "$d/card_pairs.txt" -o "$d/card_match2" --quiet > /dev/null \
  && [ -e "$d/card_match2/camB%2Fv0.png--camB%2Fv1.png.tpmatch" ] || fail "match --pairs by paths in the folder"
# Given one by one, feature files that share a file name would share outputs: refused.
"$tp" match "$d/card_feat/cam A/v0.png.tpfeat" "$d/card_feat/camB/v0.png.tpfeat" -o "$d/card_match3" --quiet \
  > /dev/null 2> "$d/stderr_match3"; rc=$?
[ "$rc" = 2 ] && grep -q "give a folder that holds both" "$d/stderr_match3" && [ ! -e "$d/card_match3" ] \
  || { cat "$d/stderr_match3"; fail "match of files sharing a file name: exit $rc"; }
stored_matches_read() {  # report.json: every pair's file read, all 8 images registered
  python3 - "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
m = r["stages"]["match"]
print("matches files read", m["files_read"], "registered", r["models"][0]["registered_images"])
sys.exit(0 if m["files_read"] == 28 and r["models"][0]["registered_images"] == 8 else 1)
PY
}
"$tp" reconstruct --features "$d/card_feat" --matches "$d/card_match" --image-path "$d/card" -o "$d/rec_card3" \
  --single-camera -q > /dev/null || fail "reconstruct --features --matches of the subfolders"
stored_matches_read "$d/rec_card3/report.json" || fail "--matches of the subfolders' images not read"
# Feature files given one by one, their file names unique (camB's renamed), are named by
# those: reconstruct finds those files too.
for i in 0 1 2 3; do mv "$d/card_feat/camB/v$i.png.tpfeat" "$d/card_feat/camB/w$i.png.tpfeat"; mv "$d/card/camB/v$i.png" "$d/card/camB/w$i.png"; done
"$tp" match "$d/card_feat/cam A/"*.tpfeat "$d/card_feat/camB/"*.tpfeat --verify fundamental -o "$d/card_match4" --quiet \
  > /dev/null && [ -e "$d/card_match4/v0.png--w0.png.tpmatch" ] || fail "match of the files one by one"
"$tp" reconstruct --features "$d/card_feat" --matches "$d/card_match4" --image-path "$d/card" -o "$d/rec_card7" \
  --single-camera -q > /dev/null || fail "reconstruct --features --matches by file names"
stored_matches_read "$d/rec_card7/report.json" || fail "--matches by the images' file names not read"
# --single-camera-per-folder: one camera for "cam A/", one for camB/, each of 4 images.
"$tp" reconstruct "$d/card" --single-camera-per-folder -o "$d/rec_card5" --no-upsample -q > /dev/null \
  || fail "reconstruct --single-camera-per-folder"
python3 - "$d/rec_card5/report.json" <<'PY' || fail "--single-camera-per-folder: not one camera per folder"
import json, sys
r = json.load(open(sys.argv[1]))
print("cameras", [(c["camera_id"], c["images"]) for c in r["cameras"]], "registered", r["models"][0]["registered_images"])
sys.exit(0 if [c["images"] for c in r["cameras"]] == [4, 4] and r["models"][0]["registered_images"] == 8 else 1)
PY
# The same cameras with the images given as files: the folder is where the file is.
"$tp" reconstruct "$d/card/cam A/"*.png "$d/card/camB/"*.png --single-camera-per-folder -o "$d/rec_card6" --no-upsample -q \
  > /dev/null || fail "reconstruct --single-camera-per-folder of files"
python3 -c 'import json, sys; sys.exit(0 if [c["images"] for c in json.load(open(sys.argv[1]))["cameras"]] == [4, 4] else 1)' \
  "$d/rec_card6/report.json" || fail "--single-camera-per-folder of files: not one camera per folder"
# --intrinsics lines name an image by its path in the folder or, these being unique, its file name.
awk 'NR == 2 { for (i = 0; i < 4; ++i) { print "v" i ".png", $2, $6, $4, $7; print "camB/w" i ".png", $2, $6, $4, $7 } }' \
  "$d/scene/scene_par.txt" > "$d/card_K.txt"
"$tp" reconstruct "$d/card" --intrinsics "$d/card_K.txt" -o "$d/rec_card4" --no-upsample -q > /dev/null 2> "$d/stderr_card4" \
  || { cat "$d/stderr_card4"; fail "reconstruct --intrinsics of the subfolders' images"; }
python3 - "$d/rec_card4/report.json" <<'PY' || fail "--intrinsics of the subfolders' images not used"
import json, sys
r = json.load(open(sys.argv[1]))
sources = {c["focal_source"] for c in r["cameras"]}
print("focal sources", sources, "registered", r["models"][0]["registered_images"])
sys.exit(0 if sources == {"intrinsics file"} and r["models"][0]["registered_images"] == 8 else 1)
PY

# 2. An unreadable image is named, skipped and listed; the rest still reconstructs.
printf 'not an image' > "$d/broken.png"
"$tp" reconstruct "${imgs[@]}" "$d/broken.png" -o "$d/rec2" --single-camera --no-upsample -q > /dev/null 2> "$d/err2" \
  || fail "one broken image must not stop the run"
grep -q "broken.png" "$d/err2" || fail "the broken image is not named on stderr"
grep -q "broken.png" "$d/rec2/report.json" || fail "the broken image is not in the report"
# A pairs file naming it: its pairs are dropped (and counted), the others matched.
{ for i in 0 1 2 3 4 5 6; do echo "view_00$i view_00$((i + 1)).png"; done; echo "broken view_000"; echo "view_001 broken.png"; } \
  > "$d/pairs_broken.txt"
"$tp" reconstruct "${imgs[@]}" "$d/broken.png" --pairs "$d/pairs_broken.txt" -o "$d/rec2b" --single-camera --no-upsample -q \
  > /dev/null 2> "$d/err2b" || { cat "$d/err2b"; fail "a pairs file naming the broken image must not stop the run"; }
python3 - "$d/rec2b/report.json" <<'PY' || fail "the pairs of the broken image are not dropped and counted"
import json, sys
m = json.load(open(sys.argv[1]))["stages"]["match"]
print("pairs", m["pairs"], "dropped", m.get("pairs_dropped_with_skipped_images"))
sys.exit(0 if m["pairs"] == 7 and m.get("pairs_dropped_with_skipped_images") == 2 else 1)
PY
grep -q "2 pair(s) of .*pairs_broken.txt dropped: an image of each was skipped" "$d/err2b" || fail "no word of the dropped pairs"
# Every pair dropped: exit 2 naming the file, no output.
printf 'broken view_000\n' > "$d/pairs_all_broken.txt"
"$tp" reconstruct "${imgs[@]}" "$d/broken.png" --pairs "$d/pairs_all_broken.txt" -o "$d/rec2c" -q > /dev/null 2> "$d/err2c"; rc=$?
[ $rc = 2 ] && grep -q "pairs_all_broken.txt: no pairs left" "$d/err2c" && [ ! -e "$d/rec2c" ] \
  || fail "every pair dropped: exit $rc, $(cat "$d/err2c")"

# 3. Fewer than two usable images: exit 1, no sparse/.
"$tp" reconstruct "${imgs[0]}" "$d/broken.png" -o "$d/rec3" -q > /dev/null 2> "$d/err3"; rc=$?
[ $rc = 1 ] || fail "one usable image: exit $rc, expected 1"
grep -q "not enough data: fewer than two usable images" "$d/err3" || fail "message: $(cat "$d/err3")"
[ -e "$d/rec3" ] && fail "output folder left without a model"

# 4. Duplicate file names: exit 2 naming both paths.
mkdir -p "$d/dup"; cp "${imgs[0]}" "$d/dup/"
"$tp" reconstruct "${imgs[@]}" "$d/dup/$(basename "${imgs[0]}")" -o "$d/rec4" -q > /dev/null 2> "$d/err4"; rc=$?
[ $rc = 2 ] || fail "duplicate names: exit $rc, expected 2"
grep -q "${imgs[0]}" "$d/err4" && grep -q "$d/dup/" "$d/err4" || fail "duplicate message: $(cat "$d/err4")"
# One file twice, under two names (given, and found again through its folder; a link).
"$tp" reconstruct "${imgs[0]}" "$d/scene" -o "$d/rec4e" -q > /dev/null 2> "$d/err4e"; rc=$?
[ $rc = 2 ] || fail "one file twice: exit $rc, expected 2"
grep -q "${imgs[0]}: the same image file given twice" "$d/err4e" || fail "one file twice: $(cat "$d/err4e")"
mkdir -p "$d/linked"; cp "${imgs[@]}" "$d/linked/"; ln -s view_000.png "$d/linked/again.png"
"$tp" reconstruct "$d/linked" -o "$d/rec4f" -q > /dev/null 2> "$d/err4f"; rc=$?
[ $rc = 2 ] || fail "a link beside its target: exit $rc, expected 2"
grep -q "the same image file twice: .*again.png and .*view_000.png" "$d/err4f" || fail "a link: $(cat "$d/err4f")"
"$tp" extract "$d/linked" -o "$d/ex4f" --quiet > /dev/null 2> "$d/err4g"; rc=$?
[ $rc = 2 ] && grep -q "view_000.png: the same image file as .*again.png" "$d/err4g" \
  && [ "$(ls "$d/ex4f" | wc -l)" = 8 ] || fail "extract of a link beside its target: exit $rc, $(cat "$d/err4g")"
[ -e "$d/rec4e" ] || [ -e "$d/rec4f" ] && fail "output folder left by a refused run"

# 4b. An option out of range: exit 2 naming it, before any work.
"$tp" reconstruct "${imgs[@]}" -o "$d/rec4b" --max-tri-angle 200 -q > /dev/null 2> "$d/err4b"; rc=$?
[ $rc = 2 ] || fail "--max-tri-angle 200: exit $rc, expected 2"
grep -q -- "--max-tri-angle" "$d/err4b" || fail "message lacks --max-tri-angle: $(cat "$d/err4b")"
[ -e "$d/rec4b" ] && fail "output folder made for a bad option"
"$tp" reconstruct "${imgs[@]}" -o "$d/rec4d" --single-camera --single-camera-per-folder -q > /dev/null 2> "$d/err4d"; rc=$?
[ $rc = 2 ] || fail "--single-camera with --single-camera-per-folder: exit $rc, expected 2"
grep -q -- "--single-camera and --single-camera-per-folder: give one" "$d/err4d" || fail "message: $(cat "$d/err4d")"
[ -e "$d/rec4d" ] && fail "output folder made for a bad option"
"$tp" reconstruct "${imgs[@]}" -o "$d/rec4c" --guided-matching sometimes -q > /dev/null 2> "$d/err4c"; rc=$?
[ $rc = 2 ] || fail "--guided-matching sometimes: exit $rc, expected 2"
grep -q -- "--guided-matching 'sometimes'" "$d/err4c" || fail "message lacks --guided-matching: $(cat "$d/err4c")"

# 4g. --camera-params (COLMAP's camera_params): every camera starts from the values given
# (the rendering's f and principal point, COLMAP's pixels), then refined: the report says
# so, and the model is as good. Bad values: exit 2 naming them, no output folder.
params=$(awk 'NR == 2 { printf "%s,%s,%s,0", $2, $4 + 0.5, $7 + 0.5 }' "$d/scene/scene_par.txt")
"$tp" reconstruct "${imgs[@]}" -o "$d/rec4g" --camera-params "$params" --single-camera --no-upsample -q > /dev/null \
  || fail "reconstruct --camera-params $params"
"$eval_bin" "$d/rec4g/sparse/0" --gt-par "$d/scene/scene_par.txt" > "$d/eval4g.json" || fail "sfm_eval of rec4g"
python3 - "$d/rec4g/report.json" "$d/eval4g.json" "$params" <<'PY' || fail "--camera-params not used, or a worse model"
import json, sys
r, e = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
c = r["cameras"][0]
print("camera", c, "registered", e["registered"], "median rotation error", e["aligned"]["median_rotation_error_deg"])
# The values start the camera as given: COLMAP's order and pixels, no offset added.
sys.exit(0 if c["focal_source"] == "camera params" and c["initial_params"] == [float(v) for v in sys.argv[3].split(",")]
         and e["registered"] == 8 and e["aligned"]["median_rotation_error_deg"] < 0.5 else 1)
PY
for bad in "1,2,3|3 values for SIMPLE_RADIAL, which takes f,cx,cy,k" "700,x,240,0|'x' is not a number" \
           "nan,320,240,0|a value is not finite" "700,320,240,-2.5|a radial distortion (-2.5) under which the image folds" \
           "3,320,240,0|a focal length (3, 3 px) not within 0.01 to 1000 times"; do
  "$tp" reconstruct "${imgs[@]}" -o "$d/rec4h" --camera-params "${bad%%|*}" -q > /dev/null 2> "$d/err4h"; rc=$?
  [ $rc = 2 ] && grep -qF -- "${bad#*|}" "$d/err4h" && [ ! -e "$d/rec4h" ] \
    || fail "--camera-params ${bad%%|*}: exit $rc, $(cat "$d/err4h")"
done
"$tp" reconstruct "${imgs[@]}" -o "$d/rec4h" --camera-params "$params" --intrinsics "$d/scene/scene_par.txt" -q \
  > /dev/null 2> "$d/err4h"; rc=$?
[ $rc = 2 ] && grep -q "give one" "$d/err4h" || fail "--camera-params with --intrinsics: exit $rc, $(cat "$d/err4h")"

# 4i. --camera-model opencv: COLMAP's OPENCV camera (fx, fy, cx, cy, k1, k2, p1, p2) in
# cameras.txt, a model that agrees with the rendering cameras, and a BAL export (observations
# undistorted: BAL has no tangential terms) that `tiepoint ba` starts at the model's error.
# --camera-params takes OPENCV's eight values; seven are refused naming them.
"$tp" reconstruct "${imgs[@]}" -o "$d/rec4i" --camera-model opencv --single-camera --no-upsample -q > /dev/null \
  || fail "reconstruct --camera-model opencv"
awk '!/^#/ { exit !($2 == "OPENCV" && NF == 12) }' "$d/rec4i/sparse/0/cameras.txt" \
  || fail "--camera-model opencv: cameras.txt has $(grep -v '^#' "$d/rec4i/sparse/0/cameras.txt")"
# A model of 8 of 8 within 0.5 deg, and its BAL export (observations undistorted) that `tiepoint
# ba` reads with every observation and starts at the model's error: check_bal_export NAME DIR.
check_bal_export() {
  local name=$1 rec=$2
  "$eval_bin" "$rec/sparse/0" --gt-par "$d/scene/scene_par.txt" > "$rec.eval.json" || fail "sfm_eval of $rec"
  "$tp" ba "$rec/sparse/0/model.bal" --max-iterations 3 --report "$rec.ba.json" > /dev/null || fail "ba on $name's model.bal"
  python3 - "$name" "$rec.eval.json" "$rec.ba.json" "$rec/report.json" <<'PY' || fail "--camera-model $name: a worse model or BAL export"
import json, sys, math
name = sys.argv[1]
e, ba, rep = (json.load(open(f)) for f in sys.argv[2:5])
rms = math.sqrt(2 * ba["initial_cost"] / (2 * ba["num_observations"]))
mean = rep["models"][0]["mean_reprojection_error_px"]
print(name + ": registered", e["registered"], "median rotation error", e["aligned"]["median_rotation_error_deg"],
      "BAL initial RMS", rms, "model mean error", mean)
sys.exit(0 if e["registered"] == 8 and e["aligned"]["median_rotation_error_deg"] < 0.5
         and rms < 2 * mean + 0.05 and ba["num_observations"] == rep["models"][0]["observations"] else 1)
PY
}
check_bal_export OPENCV "$d/rec4i"
"$tp" reconstruct "${imgs[@]}" -o "$d/rec4j" --camera-model opencv --camera-params 700,700,320,240,0,0,0 -q \
  > /dev/null 2> "$d/err4j"; rc=$?
[ $rc = 2 ] && grep -qF "7 values for OPENCV, which takes fx,fy,cx,cy,k1,k2,p1,p2" "$d/err4j" && [ ! -e "$d/rec4j" ] \
  || fail "--camera-params of 7 values for opencv: exit $rc, $(cat "$d/err4j")"

# 4m. --camera-model opencv_fisheye on the rendered (pinhole) views: COLMAP's OPENCV_FISHEYE
# line, and distortion terms that bend the equidistant projection into the pinhole one
# (tan(theta) = theta (1 + theta^2 / 3 + ...): k1 near 1/3), the model as good as the
# others; a BAL export (observations undistorted) that `tiepoint ba` starts at the model's
# error. --camera-params under which the image folds are refused naming the fisheye terms.
"$tp" reconstruct "${imgs[@]}" -o "$d/rec4m" --camera-model opencv_fisheye --single-camera --no-upsample -q > /dev/null \
  || fail "reconstruct --camera-model opencv_fisheye"
awk '!/^#/ { exit !($2 == "OPENCV_FISHEYE" && NF == 12 && $5 > 690 && $5 < 720 && $9 > 0.2 && $9 < 0.45) }' \
  "$d/rec4m/sparse/0/cameras.txt" \
  || fail "--camera-model opencv_fisheye: cameras.txt has $(grep -v '^#' "$d/rec4m/sparse/0/cameras.txt")"
check_bal_export OPENCV_FISHEYE "$d/rec4m"
"$tp" reconstruct "${imgs[@]}" -o "$d/rec4n" --camera-model simple_radial_fisheye --camera-params 300,320,240,-0.5 -q \
  > /dev/null 2> "$d/err4n"; rc=$?
[ $rc = 2 ] && grep -qF "a fisheye distortion (-0.5) under which the image folds" "$d/err4n" && [ ! -e "$d/rec4n" ] \
  || fail "--camera-params folding a fisheye: exit $rc, $(cat "$d/err4n")"

# 4o. COLMAP's other models: FULL_OPENCV (12 values), FOV (5) and THIN_PRISM_FISHEYE (12) in
# cameras.txt, each model as good as the others and its BAL export (undistorted) started at
# its error; --camera-params under which the image folds (FULL_OPENCV's rational radial
# terms, THIN_PRISM_FISHEYE's radial ones) or reaches past 90 degrees (FOV's omega) are
# refused naming them, and FOV's omega = 0 (a stationary point: it would stay there).
for spec in "full_opencv FULL_OPENCV 16" "fov FOV 9" "thin_prism_fisheye THIN_PRISM_FISHEYE 16"; do
  set -- $spec
  "$tp" reconstruct "${imgs[@]}" -o "$d/rec4o-$1" --camera-model "$1" --single-camera --no-upsample -q > /dev/null \
    || fail "reconstruct --camera-model $1"
  awk -v m="$2" -v n="$3" '!/^#/ { exit !($2 == m && NF == n && $5 > 690 && $5 < 720) }' "$d/rec4o-$1/sparse/0/cameras.txt" \
    || fail "--camera-model $1: cameras.txt has $(grep -v '^#' "$d/rec4o-$1/sparse/0/cameras.txt")"
  check_bal_export "$2" "$d/rec4o-$1"
done
for bad in "full_opencv|300,300,320,240,-2.5,0,0,0,0,0,0,0|a radial distortion (-2.5, 0, 0, 0, 0, 0) under which the image folds" \
           "fov|300,300,320,240,1.3|an omega (1.3) under which the image's farthest corner lies beyond 90 degrees" \
           "fov|300,300,320,240,0|omega = 0, where the adjustment cannot move it" \
           "thin_prism_fisheye|300,300,320,240,-0.5,0,0,0,0,0,0,0|a fisheye distortion (k1, k2, k3, k4 = -0.5, 0, 0, 0) under which the image folds"; do
  IFS='|' read -r model values want <<< "$bad"
  "$tp" reconstruct "${imgs[@]}" -o "$d/rec4p" --camera-model "$model" --camera-params "$values" -q > /dev/null 2> "$d/err4p"; rc=$?
  [ $rc = 2 ] && grep -qF -- "$want" "$d/err4p" && [ ! -e "$d/rec4p" ] \
    || fail "--camera-model $model --camera-params $values: exit $rc, $(cat "$d/err4p")"
done

# 4k. --quality (automatic_reconstructor's presets of --max-image-size and --max-features):
# the preset's values reach SIFT (report.json says which), an option given wins over it, and
# a name not among the four is refused (exit 2, no output folder).
"$tp" reconstruct "${imgs[@]}" -o "$d/rec4k" --quality low --max-image-size 400 --single-camera -q \
  > /dev/null || fail "reconstruct --quality low"
python3 - "$d/rec4k/report.json" <<'PY' || fail "--quality low with --max-image-size 400: not what SIFT ran with"
import json, sys
e = json.load(open(sys.argv[1]))["stages"]["extract"]
print("--quality low --max-image-size 400:", {k: e.get(k) for k in ("max_features", "max_image_size", "images_shrunk", "features")})
sys.exit(0 if e["max_features"] == 2048 and e["max_image_size"] == 400 and e["images_shrunk"] == 8
         and e["features"] <= 8 * 2048 else 1)
PY
"$tp" reconstruct "${imgs[@]}" -o "$d/rec4l" --quality best -q > /dev/null 2> "$d/err4l"; rc=$?
[ $rc = 2 ] && grep -qF -- "--quality 'best': expected low, medium, high or extreme" "$d/err4l" && [ ! -e "$d/rec4l" ] \
  || fail "--quality best: exit $rc, $(cat "$d/err4l")"

# 5. Images that share nothing: exit 1, no sparse/.
# (Two views of one scene seen from opposite sides, 180 degrees apart, share no points.)
"$tp" render-scene -o "$d/other" --views 2 --width 320 --height 240 > /dev/null
"$tp" reconstruct "$d/other/"*.png -o "$d/rec5" -q --no-upsample > /dev/null 2> "$d/err5"; rc=$?
[ $rc = 1 ] || fail "no initial pair: exit $rc, expected 1: $(cat "$d/err5")"
grep -q "not enough data: no image pair initialises" "$d/err5" || fail "message: $(cat "$d/err5")"
# ... and says how close the strongest pair came, and how many features the images hold.
grep -q "0 verified pairs; the most matches: [0-9]*, in view_000.png - view_001.png, of which [0-9]* fit a fundamental matrix; a pair needs 15 inliers" "$d/err5" \
  || fail "message without the strongest pair: $(cat "$d/err5")"
grep -q "features per image: [1-9][0-9]* to [1-9][0-9]*" "$d/err5" || fail "message without the feature counts: $(cat "$d/err5")"
[ -e "$d/rec5" ] && fail "output folder left without a model"
# Two neighbouring views (COLMAP's rules for small collections): a model of the two, its
# initial pair found with half the required points (the pair triangulates ~85), and its one
# camera's focal length refined from the prior (768 px; the renderer's is 704).
"$tp" reconstruct "${imgs[0]}" "${imgs[1]}" -o "$d/rec5b" -q --no-upsample --single-camera > /dev/null 2> "$d/err5b" \
  || fail "two views: exit $?: $(cat "$d/err5b")"
python3 - "$d/rec5b/report.json" "$d/rec5b/sparse/0/cameras.txt" <<'PY' || fail "two views: wrong model"
import json, sys
m = json.load(open(sys.argv[1]))["stages"]["map"]
f = float([l for l in open(sys.argv[2]) if not l.startswith("#")][0].split()[4])
print("two views: min_model_size", m["min_model_size"], "init_min_points", m["init_min_points"], "focal", f)
sys.exit(0 if m["min_model_size"] == 2 and m["init_min_points"] == 50 and abs(f - 704) < 20 else 1)
PY

# 6. --device cuda without a GPU: exit 3 naming --device cpu.
if ! "$tp" version | grep -q "^cuda device"; then
  "$tp" reconstruct "${imgs[@]}" -o "$d/rec6" --device cuda -q > /dev/null 2> "$d/err6"; rc=$?
  [ $rc = 3 ] || fail "--device cuda without GPU: exit $rc, expected 3"
  grep -q -- "--device cpu" "$d/err6" || fail "message lacks --device cpu: $(cat "$d/err6")"
  # The same for the bundle adjustment's GPU solver, before any work: exit 3, no sparse/.
  "$tp" reconstruct "${imgs[@]}" -o "$d/rec7" --ba-solver iterative-cuda -q > /dev/null 2> "$d/err7"; rc=$?
  [ $rc = 3 ] || fail "--ba-solver iterative-cuda without GPU: exit $rc, expected 3"
  grep -q -- "use --ba-solver iterative" "$d/err7" || fail "message lacks --ba-solver iterative: $(cat "$d/err7")"
  [ -e "$d/rec7" ] && fail "output folder left without a GPU"
fi
echo ok
