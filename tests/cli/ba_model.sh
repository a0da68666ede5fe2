#!/usr/bin/env bash
# ba_model.sh TIEPOINT SFM_EVAL OUTDIR: `tiepoint ba MODEL_DIR` on a COLMAP model (what
# `reconstruct` writes, as COLMAP's bundle_adjuster takes one): the model adjusted, written
# whole in the formats asked for, still agreeing with the cameras that rendered the images;
# options that apply to the other input kind refused; bad models named, nothing written.
set -u
tp=$1; eval_bin=$2; d=$3
rm -rf "$d"; mkdir -p "$d"
fail() { echo "FAIL: $*"; exit 1; }
"$tp" render-scene -o "$d/scene" --views 8 --width 640 --height 480 -q > /dev/null || fail "render-scene"
# The rendering's intrinsics held by reconstruct (PINHOLE): ba then refines them as COLMAP's
# bundle_adjuster would (focal length free, principal point held).
"$tp" reconstruct "$d"/scene/*.png -o "$d/rec" --intrinsics "$d/scene/scene_par.txt" --no-upsample -q > /dev/null \
  || fail "reconstruct"
m=$d/rec/sparse/0

# 1. The model in, adjusted, out as text and binary; the cost falls, the counts stay, the
#    points' errors are the new ones, and the cameras still agree with the rendering.
"$tp" ba "$m" -o "$d/out" --report "$d/report.json" > "$d/stdout" || fail "ba on the model: $(cat "$d/stdout")"
for f in cameras.txt images.txt points3D.txt cameras.bin images.bin points3D.bin; do
  [ -s "$d/out/$f" ] || fail "missing out/$f"
done
ls -a "$d/out" | grep -q "tmp-ba" && fail "temporary folder left behind"
"$eval_bin" "$d/out" --gt-par "$d/scene/scene_par.txt" > "$d/eval.json" || fail "sfm_eval cannot read the adjusted model"
python3 - "$d/report.json" "$d/eval.json" "$d/out/points3D.txt" "$m/points3D.txt" <<'PY' || fail "adjusted model: $(cat "$d/stdout")"
import json, sys
r, e = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
def rows(p): return [l.split() for l in open(p) if l.strip() and not l.startswith("#")]
new, old = rows(sys.argv[3]), rows(sys.argv[4])
mean_err = sum(float(x[7]) for x in new) / len(new)
print("ba on a COLMAP model:", r["solver"], "cost", r["initial_cost"], "->", r["final_cost"], "iterations", r["iterations"],
      "registered", e["registered"], "median rotation error", e["aligned"]["median_rotation_error_deg"],
      "points", len(new), "of", len(old), "mean point error", mean_err)
ok = (r["input_kind"] == "colmap model" and r["final_cost"] < r["initial_cost"] and r["iterations"] >= 1
      and len(new) == len(old) == r["num_points"] and e["registered"] == 8
      and e["aligned"]["median_rotation_error_deg"] < 0.5 and r["trace"] and r["trace"][-1]["cost"] == r["final_cost"]
      # the written errors are those of the adjusted model (ERROR column), not the input's
      and [x[7] for x in new] != [x[7] for x in old] and abs(mean_err - r["final_mean_reprojection_error_px"]) < 0.5)
sys.exit(0 if ok else 1)
PY

# 2. --format text: the text files only; the same model again, in place (-o its own folder),
#    with each solver: the same minimum.
"$tp" ba "$m" -o "$d/out_text" --format text -q > /dev/null || fail "ba --format text"
[ -s "$d/out_text/cameras.txt" ] && [ ! -e "$d/out_text/cameras.bin" ] || fail "--format text wrote $(ls "$d/out_text")"
cp -r "$m" "$d/inplace"
"$tp" ba "$d/inplace" -o "$d/inplace" --format binary -q > /dev/null || fail "ba in place"
[ "$(ls "$d/inplace" | sort | tr '\n' ' ')" = "cameras.bin cameras.txt images.bin images.txt model.bal points3D.bin points3D.txt " ] \
  || fail "in place: $(ls -a "$d/inplace")"
cmp -s "$d/inplace/points3D.bin" "$m/points3D.bin" && fail "in place: points3D.bin unchanged"
for solver in dense cholmod pcg-schur; do
  "$tp" ba "$m" --solver $solver --report "$d/r_$solver.json" -q > /dev/null || fail "ba --solver $solver on the model"
done
python3 - "$d/r_dense.json" "$d/r_cholmod.json" "$d/r_pcg-schur.json" <<'PY' || fail "the solvers disagree"
import json, sys
c = [json.load(open(p))["final_cost"] for p in sys.argv[1:]]
print("final costs dense, cholmod, pcg-schur:", c)
sys.exit(0 if abs(c[1] - c[0]) <= 1e-6 * c[0] and abs(c[2] - c[0]) <= 1e-4 * c[0] else 1)
PY

# 2b. COLMAP's BundleAdjustment.refine_* as options, on the model with an OPENCV camera
#    (distortion 0.01, 0, 0, 0 to start): --fix-poses all --fix-focal moves the points and the
#    distortion only; --fix-distortion --fix-poses 2-8 (image 1 is the gauge, held anyway)
#    moves the focal lengths and the points, every pose as it was. Ids not in the model, or
#    not ids, are refused.
mkdir -p "$d/ocv" && cp "$m"/*.txt "$d/ocv/"
sed -i 's/^1 SIMPLE_PINHOLE 640 480 \([^ ]*\) \(.*\)$/1 OPENCV 640 480 \1 \1 \2 0.01 0 0 0/' "$d/ocv/cameras.txt"
grep -q "^1 OPENCV 640 480 .* 0.01 0 0 0$" "$d/ocv/cameras.txt" || fail "OPENCV copy: $(grep -v '^#' "$d/ocv/cameras.txt")"
poses() { grep -v '^#' "$1/images.txt" | awk 'NR % 2 == 1'; }
params() { grep -v '^#' "$1/cameras.txt" | cut -d' ' -f5-; }
"$tp" ba "$d/ocv" -o "$d/fx1" --format text --fix-poses all --fix-focal --report "$d/fx1.json" -q > /dev/null || fail "ba --fix-poses all --fix-focal"
[ "$(poses "$d/fx1")" = "$(poses "$d/ocv")" ] || fail "--fix-poses all: a pose moved"
set -- $(params "$d/ocv"); f0="$1 $2"; k0="$5 $6 $7 $8"
set -- $(params "$d/fx1"); [ "$1 $2" = "$f0" ] && [ "$5 $6 $7 $8" != "$k0" ] || fail "--fix-focal: $(params "$d/fx1")"
"$tp" ba "$d/ocv" -o "$d/fx2" --format text --fix-distortion --fix-poses 2-8 --report "$d/fx2.json" -q > /dev/null \
  || fail "ba --fix-distortion --fix-poses 2-8"
[ "$(poses "$d/fx2")" = "$(poses "$d/ocv")" ] || fail "--fix-poses 2-8 (and image 1, the gauge): a pose moved"
set -- $(params "$d/fx2"); [ "$1 $2" != "$f0" ] && [ "$5 $6 $7 $8" = "$k0" ] || fail "--fix-distortion: $(params "$d/fx2")"
python3 - "$d/fx1.json" "$d/fx2.json" <<'PY' || fail "--fix-* report"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
print("--fix-poses all --fix-focal:", a["initial_cost"], "->", a["final_cost"], "; --fix-distortion --fix-poses 2-8:",
      b["initial_cost"], "->", b["final_cost"])
sys.exit(0 if (a["fixed_pose_images"] == 8 and not a["refine_focal"] and a["refine_distortion"] and
               b["fixed_pose_images"] == 8 and b["refine_focal"] and not b["refine_distortion"] and
               a["final_cost"] < a["initial_cost"] and b["final_cost"] < b["initial_cost"]) else 1)
PY
for bad in "99|--fix-poses: image 99 is not in" "3-x|--fix-poses: '3-x' is not an image id or range"; do
  "$tp" ba "$d/ocv" --fix-poses "${bad%%|*}" -o "$d/bad7" -q > /dev/null 2> "$d/err7"; rc=$?
  [ $rc = 2 ] && grep -qF -- "${bad#*|}" "$d/err7" && [ ! -e "$d/bad7" ] || fail "--fix-poses ${bad%%|*}: exit $rc, $(cat "$d/err7")"
done

# 3. Options of the other input kind: exit 2, nothing written.
"$tp" ba "$m" --precision double -o "$d/bad1" -q > /dev/null 2> "$d/err1"; rc=$?
[ $rc = 2 ] && grep -qF -- "--precision applies to BAL problems, not to the COLMAP model in $m" "$d/err1" && [ ! -e "$d/bad1" ] \
  || fail "--precision on a model: exit $rc, $(cat "$d/err1")"
"$tp" ba "$m" --solver pcg-hessian -q > /dev/null 2> "$d/err2"; rc=$?
[ $rc = 2 ] && grep -qF -- "--solver 'pcg-hessian': a COLMAP model takes auto, dense, cholmod or pcg-schur" "$d/err2" \
  || fail "--solver pcg-hessian on a model: exit $rc, $(cat "$d/err2")"
"$tp" ba "$m/model.bal" --refine-principal-point --max-iterations 1 -q > /dev/null 2> "$d/err3"; rc=$?
[ $rc = 2 ] && grep -qF -- "--refine-principal-point applies to a COLMAP model (a folder)" "$d/err3" \
  || fail "--refine-principal-point on a BAL file: exit $rc, $(cat "$d/err3")"
for opt in --fix-focal --fix-distortion "--fix-poses 1"; do
  "$tp" ba "$m/model.bal" $opt --max-iterations 1 -q > /dev/null 2> "$d/err3"; rc=$?
  [ $rc = 2 ] && grep -qF -- "${opt%% *} applies to a COLMAP model (a folder)" "$d/err3" || fail "$opt on a BAL file: exit $rc, $(cat "$d/err3")"
done

# --device cuda without a GPU: exit 3 naming --device cpu, nothing written.
if ! "$tp" version | grep -q "^cuda device"; then
  "$tp" ba "$m" --device cuda -o "$d/bad6" -q > /dev/null 2> "$d/err6"; rc=$?
  [ $rc = 3 ] && grep -q -- "use --device cpu" "$d/err6" && [ ! -e "$d/bad6" ] || fail "--device cuda without GPU: exit $rc, $(cat "$d/err6")"
fi

# 4. Bad models: named with the file and line, exit 2, no output folder.
mkdir -p "$d/broken" && cp "$m"/*.txt "$d/broken/"
sed -i 's/^1 \([A-Z_]*\) 640 480 [^ ]*/1 \1 640 480 nan/' "$d/broken/cameras.txt"
"$tp" ba "$d/broken" -o "$d/bad4" -q > /dev/null 2> "$d/err4"; rc=$?
[ $rc = 2 ] && grep -q "cameras.txt:[0-9]*: " "$d/err4" && [ ! -e "$d/bad4" ] || fail "bad camera line: exit $rc, $(cat "$d/err4")"
mkdir -p "$d/empty"
"$tp" ba "$d/empty" -o "$d/bad5" -q > /dev/null 2> "$d/err5"; rc=$?
[ $rc != 0 ] && grep -q "$d/empty" "$d/err5" && [ ! -e "$d/bad5" ] || fail "empty folder: exit $rc, $(cat "$d/err5")"
# 5. A batch job of kind ba takes a model folder; done once, it is not run again until the
#    model changes.
cp -r "$m" "$d/batch_model"
printf '{"jobs": [{"name": "model-ba", "kind": "ba", "input": "%s", "output": "adjusted"}]}\n' "$d/batch_model" > "$d/jobs.json"
"$tp" batch "$d/jobs.json" -o "$d/run" > "$d/batch1" 2>&1 || fail "batch of a model: $(cat "$d/batch1")"
grep -q "1 of 1 jobs done (1 this run, 0 already)" "$d/batch1" || fail "batch run 1: $(tail -2 "$d/batch1")"
[ -s "$d/run/jobs/model-ba/adjusted/cameras.bin" ] || fail "batch: no adjusted model in $(ls -R "$d/run/jobs/model-ba")"
"$tp" batch "$d/jobs.json" -o "$d/run" > "$d/batch2" 2>&1 || fail "batch again"
grep -q "(0 this run, 1 already)" "$d/batch2" || fail "batch run 2 ran the job again: $(tail -2 "$d/batch2")"
cp "$d/out/points3D.bin" "$d/batch_model/points3D.bin"  # another model
"$tp" batch "$d/jobs.json" -o "$d/run" > "$d/batch3" 2>&1 || fail "batch after the model changed"
grep -q "(1 this run, 0 already)" "$d/batch3" || fail "batch run 3 did not see the model change: $(tail -2 "$d/batch3")"
echo ok
