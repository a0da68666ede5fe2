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
