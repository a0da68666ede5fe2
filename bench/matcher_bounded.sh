#!/bin/bash
# The CPU matcher's bounded scan against its plain scan (features/matcher.h), on the features
# `reconstruct` extracts from each set: `tiepoint match --pairs exhaustive` (no --mutual, as
# reconstruct), TIEPOINT_MATCHER_BOUND=off and unset taking turns REPEATS times each, at
# THREADS threads; the matching seconds of every run, their minimum and median, the exact
# distances each computed, and whether the two wrote the same matches (every .tpmatch file
# byte for byte). Writes one JSON.
#
#   bench/matcher_bounded.sh [OUT.json] ["dino temple fountain5"]
#
# Sets: the Middlebury rings, and fountain5: the first five fountain-P11 photos (extracting
# all eleven takes minutes). Needs ../shared/data (TIEPOINT_SHARED_DATA); skips without it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
data=${TIEPOINT_SHARED_DATA:-$root/../shared/data}/multiview
tp=${TIEPOINT:-$root/build/tiepoint}
out_json=${1:-$root/bench/results/matcher-bounded-$(date +%Y%m%d).json}
sets=${2:-"dino temple fountain5"}
repeats=${REPEATS:-5}
threads=${THREADS:-1}
if [ ! -d "$data" ]; then
  echo "matcher_bounded.sh: no $data (../shared/data); skipped"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$root/bench/reconstruct_sets.sh"
rows=$work/rows.txt
: > "$rows"
for s in $sets; do
  case $s in
    fountain5) mapfile -t imgs < <(set_images fountain | head -5) ;;
    *) mapfile -t imgs < <(set_images "$s") ;;
  esac
  echo "== $s (${#imgs[@]} images)"
  # reconstruct's extraction (its defaults: README, `reconstruct`).
  "$tp" extract "${imgs[@]}" --upsample --max-image-size 3200 --max-features 8192 --min-features 500 \
    -o "$work/$s-feat" --threads 2 --quiet > /dev/null
  for r in $(seq "$repeats"); do
    for mode in off on; do
      o=$work/$s-$mode
      rm -rf "$o"
      if [ $mode = off ]; then
        TIEPOINT_MATCHER_BOUND=off "$tp" match "$work/$s-feat" -o "$o" --threads "$threads" --quiet > /dev/null
      else
        "$tp" match "$work/$s-feat" -o "$o" --threads "$threads" --quiet > /dev/null
      fi
      python3 - "$o/summary.json" "$s" "$mode" >> "$rows" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["totals"]
print(sys.argv[2], sys.argv[3], t["matching_seconds"], int(t["exact_distances"]), int(t["descriptor_pairs"]), t["matches"])
PY
      echo "   repeat $r $mode: $(tail -1 "$rows" | cut -d' ' -f3) s"
    done
    same=yes
    for f in "$work/$s-off"/*.tpmatch; do
      cmp -s "$f" "$work/$s-on/$(basename "$f")" || same=no
    done
    echo "$s same $same" >> "$rows"
  done
done
python3 - "$rows" "$out_json" "$tp" "$threads" <<'PY'
import json, statistics, subprocess, sys, datetime, platform, os
rows, out, tp, threads = sys.argv[1:5]
sets = {}
for line in open(rows):
    f = line.split()
    s = sets.setdefault(f[0], {"off": [], "on": [], "same_matches_every_run": True})
    if f[1] == "same":
        s["same_matches_every_run"] &= f[2] == "yes"
        continue
    s[f[1]].append(float(f[2]))
    s[f[1] + "_exact_distances"] = int(f[3])
    s["descriptor_pairs"] = int(f[4])
    s[f[1] + "_matches"] = int(f[5])
for s in sets.values():
    for k in ("off", "on"):
        s[k + "_min"] = min(s[k])
        s[k + "_median"] = statistics.median(s[k])
    s["speedup_min"] = s["off_min"] / s["on_min"]
    s["speedup_median"] = s["off_median"] / s["on_median"]
    s["exact_fraction"] = s["on_exact_distances"] / s["descriptor_pairs"]
version = subprocess.run([tp, "version"], capture_output=True, text=True).stdout.strip()
doc = {"date": datetime.date.today().isoformat(), "machine": platform.node(), "cpus": os.cpu_count(),
       "tiepoint_version": version, "threads": int(threads),
       "what": "tiepoint match --pairs exhaustive on reconstruct's features, TIEPOINT_MATCHER_BOUND=off (plain scan) "
               "and unset (bounded scan) taking turns; matching seconds from summary.json",
       "sets": sets}
json.dump(doc, open(out, "w"), indent=1)
print("wrote", out)
for k, s in sets.items():
    print(k, "off min %.3f median %.3f | on min %.3f median %.3f | %.2fx | exact %.4f | same %s" % (
        s["off_min"], s["off_median"], s["on_min"], s["on_median"], s["speedup_min"], s["exact_fraction"],
        s["same_matches_every_run"]))
PY
