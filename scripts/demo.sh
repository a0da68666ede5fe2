#!/usr/bin/env bash
# The main job: install what is missing, build in Release, bundle-adjust the sample.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/setup.sh"
tiepoint_install_packages
tiepoint_build
mkdir -p "$root/build/demo"
"$root/build/tiepoint" ba "$root/data/sample-20-2000.bal" \
  --output "$root/build/demo/sample-optimized.bal" --ply "$root/build/demo/sample.ply" \
  --report "$root/build/demo/report.json"
echo "outputs in $root/build/demo/ (optimized BAL, PLY for MeshLab/CloudCompare, JSON report)"

# Photos to model, on images tiepoint renders itself (a procedurally textured synthetic
# scene seen by a ring of cameras whose poses are known), so no outside data is needed.
"$root/build/tiepoint" render-scene -o "$root/build/demo/scene"
"$root/build/tiepoint" reconstruct "$root/build/demo/scene/"*.png -o "$root/build/demo/reconstruction" \
  --single-camera
"$root/build/bench/sfm_eval" "$root/build/demo/reconstruction/sparse/0" \
  --gt-par "$root/build/demo/scene/scene_par.txt" | grep -E '"(registered|median_rotation_error_deg|median_centre_error_fraction_of_extent)"'
echo "model in $root/build/demo/reconstruction/ (COLMAP sparse/0, points.ply, overview.svg, report.json)"
