#!/usr/bin/env bash
# How much a reconstruction depends on the RANSAC seed: `tiepoint reconstruct --seed S` for
# several seeds on the same images, each model scored by bench/sfm_eval against the ground
# truth (similarity alignment of camera centres), into one JSON:
#   bench/reconstruct_seeds.sh [OUT.json] [SETS]
# SETS (default "dino temple"; also fountain): each self-calibrated (one SIMPLE_RADIAL
# camera) and with --intrinsics from the ground truth. Environment: SEEDS (default
# "0 1 2 3 4 5 6 7"), THREADS (2), TIEPOINT_SHARED_DATA, BUILD (build).
# The seed drives every RANSAC sampler: the pairs' verification (F, E, H) and the mapper's
# absolute poses and triangulation.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out_json=${1:-$root/bench/results/reconstruct-seeds-$(date +%Y%m%d).json}
sets=${2:-"dino temple"}
seeds=${SEEDS:-"0 1 2 3 4 5 6 7"}
data=${TIEPOINT_SHARED_DATA:-$root/../shared/data}/multiview
build=${BUILD:-$root/build}
threads=${THREADS:-2}
work=$(mktemp -d /tmp/reconstruct-seeds.XXXXXX)
trap 'rm -rf "$work"' EXIT
records=$work/records.jsonl
. "$root/bench/reconstruct_sets.sh"
: > "$records"

for s in $sets; do
  case $s in
    dino|temple|fountain) ;;
    *) echo "unknown set $s (dino, temple or fountain)"; exit 2 ;;
  esac
  mapfile -t images < <(set_images "$s" 2>/dev/null)
  [ ${#images[@]} -gt 0 ] && [ -f "${images[0]}" ] || { echo "skip $s: no images under $data"; continue; }
  par=$(set_intrinsics "$s")
  for v in self known; do
    extra=(--single-camera)
    [ "$v" = known ] && extra=(--intrinsics "$par")
    for seed in $seeds; do
      o=$work/$s-$v-$seed
      "$build/tiepoint" reconstruct "${images[@]}" -o "$o" --threads "$threads" -q --seed "$seed" "${extra[@]}" \
        > /dev/null 2>&1 || true
      acc=$("$build/bench/sfm_eval" "$o/sparse/0" --gt-par "$par" 2>/dev/null || echo null)
      python3 - "$records" "$s" "$v" "$seed" "$o" "$acc" "${#images[@]}" <<'PY'
import json, os, sys
path, s, v, seed, o, acc, n = sys.argv[1:]
acc = json.loads(acc)
rep = json.load(open(o + "/report.json")) if os.path.exists(o + "/report.json") else {}
rec = {"set": s, "variant": v, "seed": int(seed), "images": int(n), "models": len(rep.get("models", [])),
       "total_seconds": rep.get("total_seconds")}
if acc:
    a = acc["aligned"]
    rec.update({"registered": acc["registered"], "median_rotation_error_deg": a["median_rotation_error_deg"],
                "max_rotation_error_deg": a["max_rotation_error_deg"],
                "max_centre_error_fraction_of_extent": a["max_centre_error_fraction_of_extent"]})
open(path, "a").write(json.dumps(rec) + "\n")
print("  %-8s %-5s seed %s: %s" % (s, v, seed, {k: (round(x, 3) if isinstance(x, float) else x)
      for k, x in rec.items() if k not in ("set", "variant", "seed", "images")}))
PY
    done
  done
done

python3 - "$records" "$out_json" "$("$build/tiepoint" version | head -1)" "$seeds" <<'PY'
import json, platform, statistics, subprocess, sys, time
records, out, version, seeds = sys.argv[1:]
runs = [json.loads(l) for l in open(records)]
summary = []
for key in sorted({(r["set"], r["variant"]) for r in runs}):
    rs = [r for r in runs if (r["set"], r["variant"]) == key]
    med = [r.get("median_rotation_error_deg") for r in rs if r.get("median_rotation_error_deg") is not None]
    summary.append({"set": key[0], "variant": key[1], "seeds": len(rs),
                    # one model of every image
                    "whole": sum(1 for r in rs if r["models"] == 1 and r.get("registered") == r["images"]),
                    "median_rotation_error_deg": {"min": min(med), "median": statistics.median(med), "max": max(med)} if med else None})
json.dump({"tool": "bench/reconstruct_seeds.sh", "date": time.strftime("%Y-%m-%d"), "tiepoint": version,
           "machine": platform.node(), "seeds": seeds.split(), "summary": summary, "runs": runs},
          open(out, "w"), indent=1)
for s in summary: print(s)
PY
