#!/usr/bin/env bash
# Side-by-side CPU benchmark of every solver on the shared BAL problems and a synthetic
# problem of about 10^6 observations: each solve 9 times, each in a fresh process, taken
# round the solvers (median times to tau); writes bench/results/cpu-solvers-<date>.{json,svg}.
#   bench/cpu_solvers.sh [THREADS]     (default: all hardware threads)
# Needs a Release build in build/ (scripts/demo.sh makes one) and ../shared/data.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tp=$root/build/tiepoint
threads=${1:-0}
data=${TIEPOINT_SHARED_DATA:-$root/../shared/data}
work=$(mktemp -d)
# OpenMP threads bound to distinct cores: unbound, a solve that starts right after another
# solver's process (Ceres's thread pool) often had both of its threads placed on one core
# until the scheduler moved one, 6-12 ms later. tiepoint widens the mask again for each
# solve process and for Ceres's own threads, so binding only places the OpenMP threads.
export OMP_PROC_BIND=${OMP_PROC_BIND:-true}
trap 'rm -rf "$work"' EXIT
"$tp" synth --cameras 500 --points 200000 --observations-per-point 5 --noise 0.5 --seed 1 \
  -o "$work/synthetic-500-200000.bal" --quiet
stamp=$(date -u +%Y%m%d)
"$tp" bench "$data/bal/problem-49-7776-pre.txt" "$data/bal/problem-21-11315-pre.txt" \
  "$data/bal/problem-16-22106-pre.txt.bz2" "$data/bal/tiny_gtsam/dubrovnik-1-1-pre.txt" \
  "$data/bal/tiny_gtsam/dubrovnik-3-7-pre.txt" "$data/bal/tiny_gtsam/dubrovnik-3-7-18-pre.txt" \
  "$work/synthetic-500-200000.bal" \
  --solvers pcg-schur,pcg-hessian,cholmod,ceres-sparse,ceres-iterative --threads "$threads" --repetitions 9 \
  --out "$root/bench/results/cpu-solvers-$stamp.json" --plot "$root/bench/results/cpu-solvers-$stamp.svg"
