#!/usr/bin/env bash
# bench/batch_overhead.sh [TIEPOINT] [SHARED_DATA]
# 1. The overhead of `tiepoint batch` over running the same jobs by hand: N `tiepoint ba` jobs
#    (the shared tiny GTSAM problems and data/sample-20-2000.bal, 1 thread, each writing its
#    report and stdout/stderr into its own directory) as a shell loop and as one batch run
#    (--jobs 1), alternated R times; also the time of a resumed run that finds every job done.
# 2. All shared BAL files x {cholmod, pcg-schur, ceres-sparse, ceres-iterative} as one batch
#    run (--jobs 1, 2 threads per solve): its summary.json and summary.svg.
# Writes bench/results/batch-overhead-DATE.json, batch-bal-solvers-DATE.{json,svg}.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
tp=${1:-$here/../build/tiepoint}
shared=${2:-${TIEPOINT_SHARED_DATA:-$here/../../shared/data}}
bal=$shared/bal
reps=${REPS:-5}
out=$here/results
date=$(date -u +%Y%m%d)
work=$(mktemp -d /tmp/tiepoint-batch-bench-XXXXXX)
trap 'rm -rf "$work"' EXIT
export OPENBLAS_THREAD_TIMEOUT=4  # as tiepoint sets for itself (no re-exec per process in either arm)

inputs=("$bal"/tiny_gtsam/*.txt "$here/../data/sample-20-2000.bal")
copies=4  # each input 4 times under different names: N = 4 x inputs
jobs_json="{\"defaults\": {\"threads\": 1, \"max-iterations\": 10}, \"jobs\": ["
n=0
for c in $(seq $copies); do
  for f in "${inputs[@]}"; do
    [ $n -gt 0 ] && jobs_json+=","
    jobs_json+="{\"name\": \"j$n\", \"kind\": \"ba\", \"input\": \"$f\"}"
    n=$((n + 1))
  done
done
jobs_json+="]}"
echo "$jobs_json" >"$work/jobs.json"

now() { date +%s.%N; }
by_hand() {
  local dir=$1 i=0
  mkdir -p "$dir"
  for c in $(seq $copies); do
    for f in "${inputs[@]}"; do
      mkdir -p "$dir/j$i"
      "$tp" ba "$f" --threads 1 --max-iterations 10 --report "$dir/j$i/report.json" --quiet \
        >"$dir/j$i/stdout.txt" 2>"$dir/j$i/stderr.txt"
      i=$((i + 1))
    done
  done
}

hand=() batch=() resume=()
for r in $(seq $reps); do
  t0=$(now); by_hand "$work/hand$r"; t1=$(now)
  "$tp" batch "$work/jobs.json" -o "$work/run$r" --quiet >/dev/null; t2=$(now)
  "$tp" batch "$work/jobs.json" -o "$work/run$r" --quiet >/dev/null; t3=$(now)
  sub() { printf '%.4f' "$(echo "$1 - $2" | bc -l)"; }
  hand+=("$(sub "$t1" "$t0")"); batch+=("$(sub "$t2" "$t1")"); resume+=("$(sub "$t3" "$t2")")
  echo "rep $r: by hand ${hand[-1]} s, batch ${batch[-1]} s, resumed (all done) ${resume[-1]} s for $n jobs"
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
mh=$(median "${hand[@]}"); mb=$(median "${batch[@]}"); mr=$(median "${resume[@]}")
per_job=$(printf '%.4f' "$(echo "($mb - $mh) / $n" | bc -l)")
printf 'median: by hand %.3f s, batch %.3f s: overhead %.1f ms per job; resumed run %.3f s (%.1f ms per done job)\n' \
  "$mh" "$mb" "$(echo "$per_job * 1000" | bc -l)" "$mr" "$(echo "$mr * 1000 / $n" | bc -l)"
list() { local IFS=,; echo "$*"; }
cat >"$out/batch-overhead-$date.json" <<EOF
{
  "benchmark": "batch_overhead",
  "command": "bench/batch_overhead.sh",
  "date": "$date",
  "commit": "${COMMIT:-$("$tp" version | sed -nE 's/.*commit ([^)]*)\).*/\1/p')}",
  "machine": "$(hostname), $(nproc) CPUs, $(sed -nE 's/^model name\s*:\s*//p' /proc/cpuinfo | head -n 1)",
  "jobs": $n,
  "job": "tiepoint ba INPUT --threads 1 --max-iterations 10 --report DIR/report.json --quiet (stdout/stderr to files), inputs: tiny_gtsam/*.txt and data/sample-20-2000.bal, $copies times each",
  "repetitions": $reps,
  "by_hand_s": [$(list "${hand[@]}")],
  "batch_s": [$(list "${batch[@]}")],
  "resumed_all_done_s": [$(list "${resume[@]}")],
  "median_by_hand_s": $mh,
  "median_batch_s": $mb,
  "median_resumed_s": $mr,
  "overhead_per_job_s": $per_job
}
EOF
echo "wrote $out/batch-overhead-$date.json"

# 2. All shared BAL files x 4 solvers.
cat >"$work/bal.json" <<EOF
{"defaults": {"threads": 2},
 "matrix": [{"kind": "ba", "input": ["$bal/*.txt", "$bal/*.txt.bz2", "$bal/tiny_gtsam/*.txt"],
             "solver": ["cholmod", "pcg-schur", "ceres-sparse", "ceres-iterative"]}]}
EOF
t0=$(now)
"$tp" batch "$work/bal.json" -o "$work/bal" --quiet || true
t1=$(now)
printf 'all shared BAL files x 4 solvers: %.2f s wall for the batch\n' "$(echo "$t1 - $t0" | bc -l)"
cp "$work/bal/summary.json" "$out/batch-bal-solvers-$date.json"
cp "$work/bal/summary.svg" "$out/batch-bal-solvers-$date.svg"
echo "wrote $out/batch-bal-solvers-$date.{json,svg}"
