#!/usr/bin/env bash
# `tiepoint ba MODEL_DIR` against COLMAP 3.8's `bundle_adjuster` (Debian package `colmap`) on
# the same COLMAP models, side by side, into one JSON:
#   bench/model_ba_compare.sh [OUT.json] [SETS]
# SETS (default "temple dino fountain"; "rendered" and "rendered60": scenes tiepoint renders,
# see reconstruct_sets.sh): each set's model is `tiepoint reconstruct`'s
# self-calibrated one (one camera; CAMERA_MODEL, default simple_radial). Both tools then adjust
# it with their defaults (least squares; focal length and distortion refined, principal point
# held; tiepoint stops at a relative cost change of 1e-6, COLMAP at Ceres' own tolerances or
# 100 iterations), and tiepoint once more run to convergence (--function-tolerance 1e-12,
# --max-iterations 100). Recorded per run: wall time, final cost as RMS per residual (COLMAP's
# "Final cost [px]", sqrt(2 cost / residuals) / sqrt(2)), the camera parameters, and the
# accuracy of the adjusted model against the ground truth (bench/sfm_eval). Environment:
# THREADS (tiepoint's, default 2; COLMAP 3.8's bundle_adjuster takes no thread option and
# uses every core), TIEPOINT_SHARED_DATA, BUILD (default build), CAMERA_MODEL, REPEATS
# (default 3: each tool's wall time is the median of REPEATS runs, taking turns).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out_json=${1:-$root/bench/results/model-ba-compare-$(date +%Y%m%d).json}
sets=${2:-"temple dino fountain"}
data=${TIEPOINT_SHARED_DATA:-$root/../shared/data}/multiview
build=${BUILD:-$root/build}
threads=${THREADS:-2}
model=${CAMERA_MODEL:-simple_radial}
repeats=${REPEATS:-3}
tp=$build/tiepoint
eval_bin=$build/bench/sfm_eval
command -v colmap > /dev/null || { echo "model_ba_compare.sh: needs colmap (apt-get install colmap)" >&2; exit 1; }
work=$(mktemp -d /tmp/model-ba-compare.XXXXXX)
trap 'rm -rf "$work"' EXIT
records=$work/records.jsonl
: > "$records"
now() { date +%s.%N; }
. "$root/bench/reconstruct_sets.sh"

for s in $sets; do
  mapfile -t imgs < <(set_images "$s")
  echo "== $s: reconstruct (${#imgs[@]} images)"
  # shellcheck disable=SC2046
  "$tp" reconstruct "${imgs[@]}" -o "$work/$s-rec" --single-camera --camera-model "$model" --threads "$threads" -q \
    $(set_reconstruct_args "$s") > /dev/null
  m=$work/$s-rec/sparse/0
  # shellcheck disable=SC2046
  "$eval_bin" "$m" $(set_gt "$s") > "$work/$s-in.json"
  for run in $(seq 1 "$repeats"); do
    for tool in tiepoint tiepoint-converged colmap; do
      o=$work/$s-$tool; rm -rf "$o"; mkdir -p "$o"
      t0=$(now)
      case $tool in
        tiepoint) "$tp" ba "$m" -o "$o" --format text --threads "$threads" --report "$o.json" -q > "$o.log" ;;
        tiepoint-converged) "$tp" ba "$m" -o "$o" --format text --threads "$threads" --report "$o.json" -q \
                              --function-tolerance 1e-12 --max-iterations 100 > "$o.log" ;;
        colmap) colmap bundle_adjuster --input_path "$m" --output_path "$o" > "$o.log" 2>&1 ;;
      esac
      t1=$(now)
      # COLMAP writes binary; its text form for reading the cameras, outside the timing.
      [ $tool = colmap ] && colmap model_converter --input_path "$o" --output_path "$o" --output_type TXT > /dev/null 2>&1
      # shellcheck disable=SC2046
      "$eval_bin" "$o" $(set_gt "$s") > "$o-eval.json"
      python3 - "$records" "$s" "$tool" "$run" "$t0" "$t1" "$o" <<'PY'
import json, re, sys
path, s, tool, run, t0, t1, o = sys.argv[1:]
cams = [l.split() for l in open(o + "/cameras.txt") if l.strip() and not l.startswith("#")]
rec = {"set": s, "tool": tool, "run": int(run), "wall_seconds": float(t1) - float(t0),
       "camera": {"model": cams[0][1], "params": [float(v) for v in cams[0][4:]]},
       "accuracy": json.load(open(o + "-eval.json"))}
if tool.startswith("tiepoint"):
    r = json.load(open(o + ".json"))
    rec.update({"final_rms_px": (r["final_cost"] / (2 * r["num_observations"])) ** 0.5,
                "initial_rms_px": (r["initial_cost"] / (2 * r["num_observations"])) ** 0.5,
                "iterations": r["iterations"], "solve_seconds": r["total_time_s"], "termination": r["termination"]})
else:
    log = open(o + ".log").read()
    f = re.findall(r"Final cost\s*:\s*([0-9.eE+-]+)", log)
    i = re.findall(r"Initial cost\s*:\s*([0-9.eE+-]+)", log)
    n = re.findall(r"Iterations\s*:\s*(\d+)", log)
    t = re.findall(r"Time\s*:\s*([0-9.eE+-]+)", log)
    rec.update({"final_rms_px": float(f[-1]) if f else None, "initial_rms_px": float(i[-1]) if i else None,
                "iterations": int(n[-1]) if n else None, "solve_seconds": float(t[-1]) if t else None})
open(path, "a").write(json.dumps(rec) + "\n")
PY
    done
  done
done

python3 - "$records" "$out_json" "$threads" "$model" "$tp" <<'PY'
import datetime, json, os, platform, statistics, subprocess, sys
records, out, threads, model, tp = sys.argv[1:]
rows = [json.loads(l) for l in open(records)]
summary = []
for s in dict.fromkeys(r["set"] for r in rows):
    entry = {"set": s}
    for tool in ("tiepoint", "tiepoint-converged", "colmap"):
        rs = [r for r in rows if r["set"] == s and r["tool"] == tool]
        a = rs[0]["accuracy"]
        entry[tool] = {"wall_median_seconds": statistics.median(r["wall_seconds"] for r in rs),
                       "walls": [r["wall_seconds"] for r in rs],
                       "solve_seconds": rs[0]["solve_seconds"], "iterations": rs[0]["iterations"],
                       "final_rms_px": rs[0]["final_rms_px"], "camera": rs[0]["camera"],
                       "median_rotation_error_deg": a["aligned"]["median_rotation_error_deg"],
                       "pairwise_median_deg": a["pairwise"]["median_relative_rotation_error_deg"]}
    c, t = entry["colmap"]["camera"]["params"], entry["tiepoint-converged"]["camera"]["params"]
    entry["camera_params_max_relative_difference_converged_vs_colmap"] = max(
        abs(x - y) / max(1.0, abs(y)) for x, y in zip(t, c))
    entry["colmap_wall_over_tiepoint_wall"] = entry["colmap"]["wall_median_seconds"] / entry["tiepoint"]["wall_median_seconds"]
    summary.append(entry)
ver = subprocess.run([tp, "version"], capture_output=True, text=True).stdout
doc = {"date": datetime.date.today().isoformat(), "machine": platform.node(), "cpus": os.cpu_count(),
       "tiepoint_threads": int(threads), "camera_model": model, "tiepoint_version": ver,
       "colmap_version": subprocess.run(["colmap", "help"], capture_output=True, text=True).stdout.splitlines()[0],
       "summary": summary, "runs": rows}
json.dump(doc, open(out, "w"), indent=1)
for e in summary:
    print(e["set"], {k: (round(v["wall_median_seconds"], 3), v["iterations"], v["final_rms_px"], round(v["median_rotation_error_deg"], 4))
                     for k, v in e.items() if isinstance(v, dict)},
          "params diff", e["camera_params_max_relative_difference_converged_vs_colmap"], "speed", round(e["colmap_wall_over_tiepoint_wall"], 1))
print("wrote", out)
PY
