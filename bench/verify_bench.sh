#!/usr/bin/env bash
# Geometric verification on many mostly unrelated pairs: the reference RANSAC loop against
# the one with early stopping (RansacOptions::early_stop: rejection of pairs with fewer
# matches than --min-inliers, the give-up bound, bounded float SIMD scoring, threads for
# the last pairs), on the same matches in the same run (bench/verify_bench.cc).
#
# Images (50, from ../shared/data): the Middlebury temple and dino sparse rings (16 + 16,
# 640x480), Oxford boat img1-6 (850x680) and 12 OpenCV samples (aero1/3, aloeL/R, box,
# box_in_scene, graf1/3, left, right, leuvenA/B): `tiepoint extract` (SIFT, defaults), then
# `tiepoint match --pairs exhaustive` without verification (1,225 pairs), then
# verify_bench for the fundamental matrix and the homography over all pairs, and for the
# essential matrix over the 496 Middlebury pairs (ground-truth K from the *_par.txt files).
# Writes bench/results/verify-cpu-<date>.json (or the path given) and prints a table.
#   bench/verify_bench.sh [OUT.json [THREADS]]
# Needs a Release build with tiepoint and verify_bench in $BUILD (default build/).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
tp=$build/tiepoint
vb=$build/bench/verify_bench
data=${TIEPOINT_SHARED_DATA:-$root/../shared/data}
out=${1:-$root/bench/results/verify-cpu-$(date -u +%Y%m%d).json}
threads=${2:-$(nproc)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/img"
for f in "$data"/multiview/middlebury/templeSparseRing/*.png "$data"/multiview/middlebury/dinoSparseRing/*.png \
         "$data"/features/oxford_boat/img*.pgm; do
  ln -s "$f" "$work/img/"
done
for f in aero1.jpg aero3.jpg aloeL.jpg aloeR.jpg box.png box_in_scene.png graf1.png graf3.png \
         left.jpg right.jpg leuvenA.jpg leuvenB.jpg; do
  ln -s "$data/features/opencv_samples/$f" "$work/img/"
done
"$tp" extract "$work"/img/* -o "$work/feat" --quiet > /dev/null
"$tp" match "$work"/feat/*.tpfeat --pairs exhaustive -o "$work/m" --quiet > /dev/null
# Intrinsics of the Middlebury views as 'NAME fx fy cx cy' (K row-major in fields 2-10).
cat "$data"/multiview/middlebury/templeSparseRing/*_par.txt "$data"/multiview/middlebury/dinoSparseRing/*_par.txt |
  awk 'NF >= 22 { print $1, $2, $6, $4, $7 }' > "$work/intrinsics.txt"
for model in fundamental homography essential; do
  echo "== $model"
  "$vb" --features "$work/feat" --matches "$work/m" --model "$model" --threads "$threads" \
    --intrinsics "$work/intrinsics.txt" --out "$work/$model.json"
done
commit=$(git -C "$root" rev-parse --short=12 HEAD)
python3 - "$work" "$out" "$commit" "$threads" <<'PY'
import json, sys, datetime, platform, os
work, out, commit, threads = sys.argv[1:5]
cpu = "unknown"
for line in open("/proc/cpuinfo"):
    if line.startswith("model name"):
        cpu = line.split(":", 1)[1].strip(); break
result = {"tool": "bench/verify_bench.sh", "date": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"),
          "commit": commit, "cpu": cpu, "hardware_threads": os.cpu_count(), "threads": int(threads),
          "images": 50, "note": "reference = RansacOptions::early_stop false (the loop before issue 18, "
          "with the new minimal solvers); seconds are wall time on a machine that may be shared, "
          "cpu_seconds the process CPU time", "models": {}}
for model in ("fundamental", "homography", "essential"):
    result["models"][model] = json.load(open(f"{work}/{model}.json"))
json.dump(result, open(out, "w"), indent=1)
print("%-12s %6s %9s %9s %9s %9s %11s %11s %7s" % ("model", "pairs", "ref s", "new s", "ref cpu", "new cpu",
      "verified", "inliers", "differ"))
for model, r in result["models"].items():
    a, b = r["reference"], r["early_stop"]
    print("%-12s %6d %9.2f %9.2f %9.2f %9.2f %5d->%-5d %5d->%-5d %7d" % (model, r["pairs"], a["seconds"], b["seconds"],
          a["cpu_seconds"], b["cpu_seconds"], a["verified_pairs"], b["verified_pairs"],
          a["inliers_of_verified_pairs"], b["inliers_of_verified_pairs"], len(r["pairs_that_differ"])))
print("wrote", out)
PY
