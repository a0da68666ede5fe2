#!/usr/bin/env bash
# tiepoint reconstruct against COLMAP 3.8 (Debian package `colmap`, CPU) on the same
# machine and images, side by side, into one JSON:
#   bench/reconstruct_compare.sh [OUT.json] [SETS]
# SETS (default "temple dino fountain balbianello kitti"). For each set: tiepoint
# self-calibrated (one SIMPLE_RADIAL camera) and, where the set has ground-truth
# intrinsics, with --intrinsics; COLMAP with defaults (feature_extractor with one
# SIMPLE_RADIAL camera, exhaustive_matcher, mapper), wall time per stage; accuracy of every
# model by bench/sfm_eval (similarity alignment of camera centres to the ground truth);
# and whether the real `colmap` reads tiepoint's models (text and binary) and reports the
# same counts (model_analyzer), and whether COLMAP's image_undistorter (the way into
# COLMAP's and OpenMVS's dense reconstruction) takes the binary model with the images and
# writes every registered image undistorted. Without colmap installed the COLMAP columns
# are null.
# Environment: THREADS (default 2), TIEPOINT_SHARED_DATA, BUILD (default build), DEVICE (cpu),
# TP_ARGS (more `tiepoint reconstruct` options, e.g. "--min-features 2000
# --min-contrast-threshold 0.0025" for the dino, or "--camera-model opencv"),
# COLMAP_CAMERA_MODEL (COLMAP's camera model, default SIMPLE_RADIAL, e.g. OPENCV beside
# TP_ARGS="--camera-model opencv"), REPEATS (default 1): each set's tiepoint
# and COLMAP runs REPEATS - 1 more times, taking turns, for their wall times only; the JSON's
# "speed" gives each tool's median and the ratio of the medians (a shared VM's speed moves
# by a third from minute to minute).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out_json=${1:-$root/bench/results/reconstruct-compare-$(date +%Y%m%d).json}
sets=${2:-"temple dino fountain balbianello kitti"}
data=${TIEPOINT_SHARED_DATA:-$root/../shared/data}/multiview
build=${BUILD:-$root/build}
threads=${THREADS:-2}
colmap_model=${COLMAP_CAMERA_MODEL:-SIMPLE_RADIAL}
device=${DEVICE:-cpu}
tp=$build/tiepoint
eval_bin=$build/bench/sfm_eval
work=$(mktemp -d /tmp/reconstruct-compare.XXXXXX)
trap 'rm -rf "$work"' EXIT
have_colmap=0
command -v colmap >/dev/null 2>&1 && have_colmap=1
records=$work/records.jsonl
: > "$records"

now() { date +%s.%N; }

# set_images, set_gt, set_intrinsics: each set's files under $data
. "$root/bench/reconstruct_sets.sh"

# record NAME TOOL VARIANT MODELDIR SECONDS STAGES_JSON
record() {
  local set=$1 tool=$2 variant=$3 model=$4 secs=$5 stages=$6 acc="null" counts="null"
  if [ -d "$model" ]; then
    # shellcheck disable=SC2046
    acc=$("$eval_bin" "$model" $(set_gt "$set") 2>/dev/null || echo null)
  fi
  python3 - "$records" "$set" "$tool" "$variant" "$secs" "$stages" "$acc" <<'PY'
import json, sys
path, s, tool, variant, secs, stages, acc = sys.argv[1:]
rec = {"set": s, "tool": tool, "variant": variant, "wall_seconds": float(secs),
       "stages": json.loads(stages), "accuracy": json.loads(acc)}
open(path, "a").write(json.dumps(rec) + "\n")
PY
}

repeats=${REPEATS:-1}
# Wall seconds of one `tiepoint reconstruct` run (model discarded): SET VARIANT
time_tiepoint() {
  local s=$1 v=$2 o=$work/repeat extra=(--single-camera)
  [ "$v" = known ] && extra=(--intrinsics "$(set_intrinsics "$s")")
  rm -rf "$o"
  local t0 t1
  t0=$(now)
  # shellcheck disable=SC2086
  "$tp" reconstruct "${imgs[@]}" -o "$o" --threads "$threads" --device "$device" -q "${extra[@]}" ${TP_ARGS:-} \
    > /dev/null 2>&1 || true
  t1=$(now)
  rm -rf "$o"
  python3 -c "print($t1-$t0)"
}
# Wall seconds of one COLMAP run (extract, match, map; discarded): SET
time_colmap() {
  local c=$work/repeat-colmap t0 t1
  rm -rf "$c"; mkdir -p "$c/images" "$c/sparse"
  for f in "${imgs[@]}"; do ln -s "$f" "$c/images/$(basename "$f")"; done
  t0=$(now)
  colmap feature_extractor --database_path "$c/db.db" --image_path "$c/images" --ImageReader.single_camera 1 \
    --ImageReader.camera_model "$colmap_model" --SiftExtraction.use_gpu 0 --SiftExtraction.num_threads "$threads" > /dev/null 2>&1 || true
  colmap exhaustive_matcher --database_path "$c/db.db" --SiftMatching.use_gpu 0 --SiftMatching.num_threads "$threads" > /dev/null 2>&1 || true
  colmap mapper --database_path "$c/db.db" --image_path "$c/images" --output_path "$c/sparse" \
    --Mapper.num_threads "$threads" > /dev/null 2>&1 || true
  t1=$(now)
  rm -rf "$c"
  python3 -c "print($t1-$t0)"
}

for s in $sets; do
  mapfile -t imgs < <(set_images "$s")
  [ ${#imgs[@]} -gt 0 ] || { echo "skip $s: no images under $data"; continue; }
  echo "== $s (${#imgs[@]} images)"
  variants="self"
  [ -n "$(set_intrinsics "$s")" ] && variants="self known"
  for v in $variants; do
    o=$work/$s-tiepoint-$v
    extra=(--single-camera)
    [ "$v" = known ] && extra=(--intrinsics "$(set_intrinsics "$s")")
    if [ "$s" = kitti ]; then
      "$tp" track "${imgs[@]}" -o "$work/kitti-tracks.txt" >/dev/null
      echo "* 718.856 718.856 607.1928 185.2157" > "$work/kitti-intrinsics.txt"
      extra=(--tracks "$work/kitti-tracks.txt" --pairs sequential:4 --intrinsics "$work/kitti-intrinsics.txt")
      t0=$(now)
      "$tp" reconstruct "${imgs[@]}" -o "$o" --threads "$threads" \
        --device "$device" -q "${extra[@]}" > "$work/log" 2>&1 || true
    else
      t0=$(now)
      # shellcheck disable=SC2086
      "$tp" reconstruct "${imgs[@]}" -o "$o" --threads "$threads" --device "$device" -q "${extra[@]}" \
        ${TP_ARGS:-} > "$work/log" 2>&1 || true
    fi
    t1=$(now)
    secs=$(python3 -c "print($t1-$t0)")
    stages=$(python3 -c "import json;r=json.load(open('$o/report.json'));print(json.dumps({k:v.get('seconds') for k,v in r['stages'].items()}))" 2>/dev/null || echo '{}')
    echo "   tiepoint $v: $secs s"; cat "$work/log" | head -5
    record "$s" tiepoint "$v" "$o/sparse/0" "$secs" "$stages"
    # The real colmap reads both formats of the model and reports the same counts.
    if [ $have_colmap = 1 ] && [ -d "$o/sparse/0" ]; then
      for fmt in txt bin; do
        d=$work/$s-$v-$fmt; mkdir -p "$d"; cp "$o"/sparse/0/*.$fmt "$d"/
        colmap model_analyzer --path "$d" > "$d.analyzer" 2>&1 || true
      done
      u=$work/$s-$v-undistorted
      colmap image_undistorter --image_path "$(dirname "${imgs[0]}")" --input_path "$work/$s-$v-bin" \
        --output_path "$u" > "$u.log" 2>&1 || true
      undistorted=$(find "$u/images" -type f 2>/dev/null | wc -l)
      python3 - "$records" "$s" "$v" "$work/$s-$v-txt.analyzer" "$work/$s-$v-bin.analyzer" "$o/report.json" \
        "$undistorted" <<'PY'
import json, re, sys
path, s, v, a_txt, a_bin, rep, undistorted = sys.argv[1:]
def parse(p):
    t = open(p).read()
    g = lambda k: (re.search(k + r":\s*([0-9.]+)", t) or [None, None])[1]
    return {"registered_images": g("Registered images"), "points": g("Points"),
            "observations": g("Observations"), "mean_reprojection_error": g("Mean reprojection error"),
            "raw": t[-600:]}
r = json.load(open(rep))["models"][0]
txt, binary = parse(a_txt), parse(a_bin)
# model_analyzer's "Mean reprojection error" is the mean over points of each point's mean
# error: report.json's mean_point_error_px (mean_reprojection_error_px is over observations).
same = all(m[k] is not None and float(m[k]) == float(r[k]) for m in (txt, binary)
           for k in ("registered_images", "points", "observations")) and \
       all(m["mean_reprojection_error"] is not None and
           abs(float(m["mean_reprojection_error"]) - r["mean_point_error_px"]) <= 5e-7 for m in (txt, binary))
open(path, "a").write(json.dumps({"set": s, "tool": "colmap model_analyzer on tiepoint's model", "variant": v,
    "text": txt, "binary": binary, "same_as_report": same,
    "image_undistorter": {"images_written": int(undistorted),
                          "every_registered_image": int(undistorted) == int(r["registered_images"])},
    "tiepoint_report": {k: r[k] for k in ("registered_images", "points", "observations", "mean_reprojection_error_px",
                                          "mean_point_error_px")}}) + "\n")
PY
    fi
  done
  # COLMAP, defaults, one SIMPLE_RADIAL camera (or COLMAP_CAMERA_MODEL).
  if [ $have_colmap = 1 ] && [ "$s" != kitti ]; then
    c=$work/$s-colmap; mkdir -p "$c/images" "$c/sparse"
    for f in "${imgs[@]}"; do ln -s "$f" "$c/images/$(basename "$f")"; done
    t0=$(now)
    colmap feature_extractor --database_path "$c/db.db" --image_path "$c/images" --ImageReader.single_camera 1 \
      --ImageReader.camera_model "$colmap_model" --SiftExtraction.use_gpu 0 --SiftExtraction.num_threads "$threads" > "$c/log" 2>&1 || true
    t1=$(now)
    colmap exhaustive_matcher --database_path "$c/db.db" --SiftMatching.use_gpu 0 --SiftMatching.num_threads "$threads" >> "$c/log" 2>&1 || true
    t2=$(now)
    colmap mapper --database_path "$c/db.db" --image_path "$c/images" --output_path "$c/sparse" \
      --Mapper.num_threads "$threads" >> "$c/log" 2>&1 || true
    t3=$(now)
    stages=$(python3 -c "print('{\"extract\": %f, \"match\": %f, \"map\": %f}' % ($t1-$t0, $t2-$t1, $t3-$t2))")
    secs=$(python3 -c "print($t3-$t0)")
    echo "   colmap: $secs s"
    record "$s" colmap self "$c/sparse/0" "$secs" "$stages"
  fi
  if [ "$repeats" -gt 1 ] && [ "$s" != kitti ]; then
    for ((r = 2; r <= repeats; ++r)); do
      for v in $variants; do
        secs=$(time_tiepoint "$s" "$v")
        echo "   repeat $r tiepoint $v: $secs s"
        echo "{\"set\": \"$s\", \"tool\": \"tiepoint\", \"variant\": \"$v\", \"repeat\": $r, \"wall_seconds\": $secs}" >> "$work/repeats.jsonl"
      done
      if [ $have_colmap = 1 ]; then
        secs=$(time_colmap "$s")
        echo "   repeat $r colmap: $secs s"
        echo "{\"set\": \"$s\", \"tool\": \"colmap\", \"variant\": \"self\", \"repeat\": $r, \"wall_seconds\": $secs}" >> "$work/repeats.jsonl"
      fi
    done
  fi
done
touch "$work/repeats.jsonl"

python3 - "$records" "$out_json" "$tp" "$threads" "$device" "$work/repeats.jsonl" <<'PY'
import json, subprocess, sys, platform, datetime, os, statistics
records, out, tp, threads, device, repeats = sys.argv[1:]
rows = [json.loads(l) for l in open(records)]
reps = [json.loads(l) for l in open(repeats)]
# Each tool's wall times per set and variant (the recorded run first), their medians, and
# COLMAP's median over tiepoint's.
walls = {}
for r in rows + reps:
    if r["tool"] in ("tiepoint", "colmap") and "wall_seconds" in r:
        walls.setdefault((r["set"], r["tool"], r["variant"]), []).append(r["wall_seconds"])
speed = []
for (s, tool, v), w in sorted(walls.items()):
    if tool != "tiepoint":
        continue
    entry = {"set": s, "variant": v, "tiepoint_walls": w, "tiepoint_median": statistics.median(w)}
    c = walls.get((s, "colmap", "self"))
    if c:
        entry.update({"colmap_walls": c, "colmap_median": statistics.median(c),
                      "colmap_over_tiepoint": statistics.median(c) / statistics.median(w)})
    speed.append(entry)
ver = subprocess.run([tp, "version"], capture_output=True, text=True).stdout
doc = {"date": datetime.date.today().isoformat(), "machine": platform.node(), "cpus": os.cpu_count(),
       "threads": int(threads), "device": device, "tiepoint_version": ver, "tiepoint_extra_args": os.environ.get("TP_ARGS", ""), "colmap_camera_model": os.environ.get("COLMAP_CAMERA_MODEL", "SIMPLE_RADIAL"),
       "repeats": int(os.environ.get("REPEATS", "1")), "speed": speed, "runs": rows}
try:
    doc["colmap_version"] = subprocess.run(["colmap", "help"], capture_output=True, text=True).stdout.splitlines()[0]
except Exception:
    doc["colmap_version"] = None
json.dump(doc, open(out, "w"), indent=1)
print("wrote", out)
PY
