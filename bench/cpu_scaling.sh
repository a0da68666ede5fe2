#!/usr/bin/env bash
# CPU scaling of pcg-schur in float: time per LM iteration and per CG iteration, and peak
# memory per observation, on synthetic problems of 10^5, 10^6 and 10^7 observations
# (4 observations per point, 1 camera per 4,000 observations), with stored and with
# recomputed Jacobian blocks. Every LM iteration runs exactly CG_ITERS CG iterations, so
# the work per LM iteration is the same at every size and time per iteration can be
# compared across sizes. Each run is repeated (REPS, default 3; once at 10^7) and the
# fastest kept, as timings on a shared machine only ever err upwards.
# Writes bench/results/cpu-scaling-<date>.json.
#   bench/cpu_scaling.sh [THREADS] [SIZES...]     (defaults: all threads; 1e5 1e6 1e7)
# Needs a Release build in build/ (scripts/demo.sh makes one); ~3 GB of RAM and disk.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tp=$root/build/tiepoint
threads=${1:-0}
shift || true
sizes=("${@:-100000 1000000 10000000}")
read -r -a sizes <<< "${sizes[*]}"
cg_iters=20
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMP_PROC_BIND=${OMP_PROC_BIND:-true}
# Baseline: the resident size of the binary doing nothing (shared libraries, CUDA runtime).
"$tp" version > /dev/null
baseline_kib=$( { /usr/bin/time -f "%M" "$tp" version > /dev/null; } 2>&1 | tail -1)
runs=()
for n in "${sizes[@]}"; do
  cams=$(( n / 4000 )); (( cams < 10 )) && cams=10
  pts=$(( n / 4 ))
  bal=$work/synthetic-$n.bal
  "$tp" synth --cameras "$cams" --points "$pts" --observations-per-point 4 --seed 3 -o "$bal" --quiet
  reps=${REPS:-3}
  (( n >= 10000000 )) && reps=1
  for jac in stored recompute; do
    iters=3
    [[ $jac == recompute ]] && iters=1
    for ((k = 0; k < reps; ++k)); do
      rep=$work/report-$n-$k-$jac.json
      echo "== $n observations, $jac: $iters LM iterations x $cg_iters CG iterations (run $((k + 1)))" >&2
      "$tp" ba "$bal" --solver pcg-schur --precision float --jacobian "$jac" --threads "$threads" \
        --max-iterations "$iters" --cg-min-iterations "$cg_iters" --cg-max-iterations "$cg_iters" \
        --report "$rep" | sed -n '5,6p' >&2
      runs+=("$rep")
    done
  done
  rm -f "$bal"
done
stamp=$(date -u +%Y%m%d)
out=$root/bench/results/cpu-scaling-$stamp.json
python3 - "$out" "$baseline_kib" "$cg_iters" "${runs[@]}" <<'PY'
import json, subprocess, sys, datetime
out, baseline_kib, cg_iters, reports = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
best = {}
for path in reports:
    r = json.load(open(path))
    trace = [t for t in r["trace"] if t["iteration"] > 0]
    cg = sum(t["linear_iterations"] for t in trace)
    n = r["num_observations"]
    peak = r["peak_rss_bytes"]
    jac = "recompute" if path.endswith("-recompute.json") else "stored"
    row = ({
        "observations": n, "cameras": r["num_cameras"], "points": r["num_points"], "jacobian": jac,
        "threads": r["threads"], "lm_iterations": len(trace), "cg_iterations": cg,
        "time_per_lm_iteration_s": sum(t["iteration_time_s"] for t in trace) / len(trace),
        "time_per_cg_iteration_s": r["linear_solver_time_s"] / cg if cg else None,
        "peak_rss_bytes": peak, "baseline_rss_bytes": baseline_kib * 1024,
        "peak_bytes_per_observation": peak / n,
        "peak_minus_baseline_bytes_per_observation": (peak - baseline_kib * 1024) / n,
    })
    key = (n, jac)
    if key not in best or row["time_per_lm_iteration_s"] < best[key]["time_per_lm_iteration_s"]:
        best[key] = row
    build, machine = r["build"], r["machine"]
rows = [best[k] for k in sorted(best)]
for jac in ("stored", "recompute"):
    sel = sorted([x for x in rows if x["jacobian"] == jac], key=lambda x: x["observations"])
    for a, b in zip(sel, sel[1:]):
        b["time_per_lm_iteration_ratio_to_previous"] = b["time_per_lm_iteration_s"] / a["time_per_lm_iteration_s"]
        b["observation_ratio_to_previous"] = b["observations"] / a["observations"]
result = {
    "benchmark": "cpu-scaling: pcg-schur float, synthetic, 4 observations per point, "
                 f"{cg_iters} CG iterations per LM iteration",
    "date": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"),
    "machine": machine, "build": build, "runs": rows,
    "notes": {"peak_rss_bytes": "ru_maxrss of tiepoint ba (reading the BAL text file included)",
              "baseline_rss_bytes": "ru_maxrss of `tiepoint version` (libraries, no data)"},
}
json.dump(result, open(out, "w"), indent=2)
print(f"{'obs':>10} {'jacobian':>9} {'s/LM it':>9} {'ms/CG it':>9} {'B/obs':>7} {'B/obs-base':>10}")
for x in rows:
    print(f"{x['observations']:>10} {x['jacobian']:>9} {x['time_per_lm_iteration_s']:>9.3f} "
          f"{1e3 * (x['time_per_cg_iteration_s'] or 0):>9.2f} {x['peak_bytes_per_observation']:>7.1f} "
          f"{x['peak_minus_baseline_bytes_per_observation']:>10.1f}")
print("wrote", out)
PY
