#!/usr/bin/env bash
# batch_slurm.sh TIEPOINT WORKDIR [SHARED_DATA]
# `tiepoint batch slurm` on a real one-node Slurm cluster (scripts/slurm-local.sh): every
# shared BAL file under two solvers, 3 array tasks and the dependent summarize job, submitted
# with `bash submit.sh --wait`; then the same job file run locally, and the two summaries'
# job lists, statuses and final costs compared. Stops the daemons it started (by pid).
# Exit 77 (skipped) with the reason when the shared data is absent or the daemons cannot run.
set -u
tp=$1
work=$2
shared=${TIEPOINT_SHARED_DATA:-${3:-}}
here=$(cd "$(dirname "$0")" && pwd)
slurm_local=$here/../../scripts/slurm-local.sh

bal=$shared/bal
if [ -z "$shared" ] || [ ! -d "$bal" ]; then
  echo "SKIP: no shared BAL data (set TIEPOINT_SHARED_DATA; looked in '${shared:-}/bal')"
  exit 77
fi
rm -rf "$work"
mkdir -p "$work"
work=$(cd "$work" && pwd)

cat >"$work/jobs.json" <<EOF
{
  "comment": "every shared BAL file x 2 solvers",
  "defaults": {"threads": 1, "max-iterations": 20},
  "matrix": [{"kind": "ba", "input": ["$bal/*.txt", "$bal/*.txt.bz2", "$bal/tiny_gtsam/*.txt"],
              "solver": ["cholmod", "pcg-schur"]}]
}
EOF

if ! "$slurm_local" start "$work/slurm" 2>"$work/slurm-start.log"; then
  echo "SKIP: a one-node Slurm cannot run here:"
  cat "$work/slurm-start.log"
  exit 77
fi
trap '"$slurm_local" stop "$work/slurm"' EXIT
export SLURM_CONF=$work/slurm/slurm.conf

fail=0
start=$(date +%s)
"$tp" batch slurm "$work/jobs.json" -o "$work/run-slurm" --shards 3 >"$work/submit.sh" || { echo "batch slurm failed"; exit 1; }
# --wait: sbatch returns when the summary job (after every array task) has ended, with its exit code.
if ! timeout 600 bash "$work/submit.sh" --wait >"$work/submit.out" 2>&1; then
  echo "the Slurm run failed:"; cat "$work/submit.out"; cat "$work/run-slurm/slurm/"*.out 2>/dev/null | tail -n 40
  fail=1
fi
echo "Slurm: 3 shards + summary in $(( $(date +%s) - start )) s"
ls "$work/run-slurm/slurm/"
for i in 0 1 2; do
  [ -f "$work/run-slurm/shards/$i-of-3.json" ] || { echo "shard $i/3 wrote no shard file"; fail=1; }
done

"$tp" batch "$work/jobs.json" -o "$work/run-local" --jobs 2 >"$work/local.out" 2>&1 || { echo "local run failed"; cat "$work/local.out"; fail=1; }

# name, status and result of every job (the times differ, the results must not).
table() { "$tp" batch summarize "$1" | sed -nE 's/^(\S+)\s+ba\s+(\S+)\s+\S+\s+\S+\s+\S+\s+(.*)$/\1 \2 \3/p'; }
table "$work/run-slurm" >"$work/slurm.table"
table "$work/run-local" >"$work/local.table"
cat "$work/slurm.table"
n=$(grep -c ' done final cost ' "$work/slurm.table")
want=$(( $(ls "$bal"/*.txt "$bal"/*.txt.bz2 "$bal"/tiny_gtsam/*.txt | wc -l) * 2 ))
if [ "$n" != "$want" ]; then echo "Slurm run: $n of $want jobs done"; fail=1; fi
if ! diff "$work/local.table" "$work/slurm.table"; then echo "the Slurm and local summaries differ"; fail=1; fi
# Each shard ran exactly its jobs (index % 3).
for f in "$work/run-slurm/jobs/"*/job.json; do
  idx=$(sed -nE 's/^  "index": ([0-9]+),?$/\1/p' "$f")
  shard=$(sed -nE 's/^  "shard": "([0-9]+)\/3",?$/\1/p' "$f")
  [ "$(( idx % 3 ))" = "$shard" ] || { echo "$f: job $idx ran in shard $shard"; fail=1; }
done
[ "$fail" = 0 ] && echo "OK: $n jobs on Slurm in 3 shards equal the local run"
exit $fail
