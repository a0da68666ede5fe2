#!/usr/bin/env bash
# scripts/fuzz.sh [SECONDS] [TARGET...]
# Builds the libFuzzer targets (tests/fuzz/, clang with -fsanitize=fuzzer,address,undefined,
# in $FUZZ_BUILD, default build-fuzz) and runs each for SECONDS (default 600), one at a
# time, at nice 19. Each run starts from the committed seeds (tests/fuzz/corpus/<target>/)
# plus what earlier runs found (<build>/fuzz-work/<target>/corpus/); crashes, leaks,
# timeouts (> 1 s) and allocations over 256 MB go to <build>/fuzz-work/<target>/crashes/.
# Writes bench/results/fuzz-<date>.json: executions, exec/s, coverage (edges, libFuzzer's
# "cov") and findings per target. Exit code 1 when any target found something.
# FUZZ_RUNS=N stops a target after N executions (or SECONDS, whichever comes first).
# FUZZ_OUT=FILE writes (or merges into) FILE instead of the day's file.
# FUZZ_NICE=N runs the fuzzers at nice N (default 19).
# FUZZ_SKIP_BUILD=1 runs the fuzz_* binaries already in the build directory (a commit
# elsewhere in a shared tree changes the build-info header and would rebuild them).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-600}
shift || true
all=(bal_text bal_bz2 image_png image_jpeg image_pnm image_tiff features matches intrinsics middlebury
     colmap_text colmap_binary track_file batch_jobs exif bz2_staged pairs_file)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
build=${FUZZ_BUILD:-$root/build-fuzz}
command -v clang++ >/dev/null || { echo "fuzz.sh: needs clang (apt-get install clang)" >&2; exit 2; }

flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
if [ -z "${FUZZ_SKIP_BUILD:-}" ]; then
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTIEPOINT_WITH_CUDA=OFF \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_FLAGS="$flags" \
  -DCMAKE_CXX_FLAGS="$flags" -DTIEPOINT_FUZZ=ON -DTIEPOINT_FUZZ_REPLAY=OFF >/dev/null
nice -n 19 cmake --build "$build" -j "${JOBS:-2}" --target "${targets[@]/#/fuzz_}" -- --no-print-directory >/dev/null
fi

# Longest input per target: enough for every structure of its format, small enough to
# keep executions fast (the readers' costs grow with the input, not with its header).
max_len() {
  case $1 in
    features|matches|intrinsics|track_file|batch_jobs|pairs_file) echo 2048 ;;
    *) echo 4096 ;;
  esac
}

commit=$(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
dirty=$(git -C "$root" status --porcelain -- io tests/fuzz cli/batch_jobs.h cli/batch_jobs.cc 2>/dev/null | grep -q . && echo true || echo false)
date_tag=$(date +%Y%m%d)
out=${FUZZ_OUT:-$root/bench/results/fuzz-$date_tag.json}
entries=()
found=0
for t in "${targets[@]}"; do
  work=$build/fuzz-work/$t
  mkdir -p "$work/corpus" "$work/crashes"
  log=$work/last.log
  echo "fuzz.sh: $t for ${seconds}s (max_len $(max_len "$t"))"
  # A timeout on this shared 2-core machine may be the machine, not the input: each one
  # is run again alone three times, and only one that still takes over 1 s of CPU counts.
  # A spurious one is recorded and the run goes on for the time that is left.
  execs=0; spurious=(); rc=0; left=$seconds; runs_left=${FUZZ_RUNS:-0}; start=$SECONDS
  while [ "$left" -gt 0 ]; do
    set +e
    ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0 \
      nice -n "${FUZZ_NICE:-19}" "$build/tests/fuzz/fuzz_$t" "$work/corpus" "$root/tests/fuzz/corpus/$t" \
      -max_total_time="$left" -runs="$( [ "$runs_left" -gt 0 ] && echo "$runs_left" || echo -1)" \
      -timeout=1 -rss_limit_mb=2048 -malloc_limit_mb=256 \
      -max_len="$(max_len "$t")" -print_final_stats=1 -artifact_prefix="$work/crashes/" \
      >"$log" 2>&1
    rc=$?
    set -e
    n=$(grep -m1 "^stat::number_of_executed_units:" "$log" | awk '{print $2}')
    if [ -z "$n" ]; then  # a crash ends the run before the final stats: take the last line
      n=$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#')
    fi
    execs=$(( execs + ${n:-0} ))
    if [ "$runs_left" -gt 0 ]; then
      runs_left=$(( runs_left - ${n:-0} ))
      if [ "$runs_left" -le 0 ]; then break; fi
    fi
    left=$(( seconds - (SECONDS - start) ))
    [ "$rc" = 0 ] && break
    timeout_file=$(ls -t "$work"/crashes/timeout-* 2>/dev/null | head -1 || true)
    if grep -q "ERROR: libFuzzer: timeout" "$log" && [ -n "$timeout_file" ]; then
      # CPU time, not wall time: a loaded machine stretches the wall clock, a hang burns CPU.
      slow=0
      for _ in 1 2 3; do
        /usr/bin/time -o "$work/cpu" -f "%U %S" "$build/tests/fuzz/fuzz_$t" "$timeout_file" >/dev/null 2>&1
        cpu=$(tail -1 "$work/cpu")
        awk -v c="$cpu" 'BEGIN { split(c, a, " "); exit !(a[1] + a[2] > 1.0) }' && slow=1
      done
      if [ "$slow" = 0 ]; then
        spurious+=("$(basename "$timeout_file")")
        mkdir -p "$work/spurious" && mv "$timeout_file" "$work/spurious/"
        echo "fuzz.sh: $t: spurious timeout (under 1 s alone, 3 times); going on for ${left}s"
        rc=0
        continue
      fi
    fi
    break
  done
  eps=$(( execs / ( (SECONDS - start) > 0 ? (SECONDS - start) : 1 ) ))
  rss=$(grep -m1 "^stat::peak_rss_mb:" "$log" | awk '{print $2}'); rss=${rss:-0}
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  edges=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$last"); edges=${edges:-0}
  feats=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$last"); feats=${feats:-0}
  corpus=$(sed -nE 's/.* corp: ([0-9]+)\/.*/\1/p' <<<"$last"); corpus=${corpus:-0}
  findings=$(cd "$work/crashes" && ls -1 2>/dev/null | sed 's/.*/"&"/' | paste -sd, -)
  spurious_json=$(printf '"%s",' "${spurious[@]}" | sed 's/,$//; s/^""$//')
  if [ "$rc" != 0 ] || [ -n "$findings" ]; then
    found=1
    echo "fuzz.sh: $t FOUND something (exit $rc): see $log and $work/crashes/"
    grep -E "ERROR|SUMMARY|fuzz check" "$log" | head -5 || true
  fi
  echo "fuzz.sh: $t: $execs executions ($eps/s), $edges edges, corpus $corpus"
  entries+=("$(printf '    "%s": {"seconds": %s, "max_len": %s, "executions": %s, "exec_per_s": %s, "edges": %s, "features": %s, "corpus_units": %s, "peak_rss_mb": %s, "exit_code": %s, "findings": [%s], "spurious_timeouts": [%s]}' \
    "$t" "$(( SECONDS - start ))" "$(max_len "$t")" "$execs" "$eps" "$edges" "$feats" "$corpus" "$rss" "$rc" "$findings" "$spurious_json")")
done

mkdir -p "$(dirname "$out")"
{
  echo "{"
  echo "  \"what\": \"scripts/fuzz.sh $seconds: libFuzzer + ASan + UBSan on every file reader\","
  echo "  \"commit\": \"$commit\", \"uncommitted_changes_in_io_or_fuzz\": $dirty,"
  echo "  \"date\": \"$(date -u +%Y-%m-%dT%H:%M:%SZ)\","
  echo "  \"machine\": \"$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), nice ${FUZZ_NICE:-19}, ${FUZZ_PARALLEL_NOTE:-one fuzzer at a time}\","
  echo "  \"compiler\": \"$(clang++ --version | head -1)\","
  echo "  \"options\": \"-timeout=1 -rss_limit_mb=2048 -malloc_limit_mb=256 -max_len per target; leaks detected\","
  echo "  \"targets\": {"
  for i in "${!entries[@]}"; do
    sep=,; [ "$i" = $(( ${#entries[@]} - 1 )) ] && sep=
    echo "${entries[$i]}$sep"
  done
  echo "  }"
  echo "}"
} >"$out.tmp"
# Runs of a subset the same day merge into the day's file (later runs win per target).
if [ -f "$out" ] && command -v python3 >/dev/null; then
  python3 - "$out" "$out.tmp" <<'PY'
import json, sys
old, new = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
targets = old.get("targets", {}); targets.update(new["targets"]); new["targets"] = targets
json.dump(new, open(sys.argv[2], "w"), indent=2)
PY
fi
mv "$out.tmp" "$out"
echo "fuzz.sh: wrote $out"
exit $found
