#!/usr/bin/env bash
# Relative poses from `tiepoint match --verify essential --intrinsics` on the Middlebury
# sparse rings (templeSparseRing, dinoSparseRing: 16 views each, ground-truth K, R, t in
# *_par.txt with x = K [R | t] X), against the ground truth, for neighbouring views:
# each view with the two views whose ground-truth camera centres are nearest, each pair
# once (the file order is not the ring order: templeSR0002 and 0003 are 54 degrees apart;
# views at the same place, templeSR0001 and 0011, are not neighbours):
#   rotation error    = angle of R_est^T R_true, R_true = R2 R1^T (cam2_from_cam1), degrees;
#   direction error   = angle between t_est and t_true = t2 - R_true t1, degrees.
# The acceptance bound of issue 7 is a rotation error <= 1 degree.
# SIFT features: `tiepoint extract --upsample --contrast-threshold 0.01` (CPU; the objects
# are dark and matte on black). Writes bench/results/match-middlebury-<date>.json (or the
# path given) and prints a table.
#   bench/match_middlebury.sh [OUT.json [MATCH OPTIONS...]]
# Needs a Release build in build/ and ../shared/data (or $TIEPOINT_SHARED_DATA).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tp=$root/build/tiepoint
data=${TIEPOINT_SHARED_DATA:-$root/../shared/data}
out=${1:-$root/bench/results/match-middlebury-$(date -u +%Y%m%d).json}
shift || true
extra=("$@")  # further options for tiepoint match, e.g. --max-error 1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for set in templeSparseRing dinoSparseRing; do
  dir=$data/multiview/middlebury/$set
  par=$(ls "$dir"/*_par.txt)
  "$tp" extract --upsample --contrast-threshold 0.01 "$dir"/*.png -o "$work/$set/f" --quiet > /dev/null
  python3 - "$par" > "$work/$set/pairs.txt" <<'PY'
import sys
views = []
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) < 22: continue
    v = list(map(float, f[1:]))
    R = [v[9:12], v[12:15], v[15:18]]; t = v[18:21]
    views.append((f[0], [-sum(R[k][i] * t[k] for k in range(3)) for i in range(3)]))
def dist(a, b): return sum((x - y) ** 2 for x, y in zip(a, b)) ** 0.5
pairs = set()
for i, (_, c) in enumerate(views):
    norm = sum(x * x for x in c) ** 0.5
    others = sorted((j for j in range(len(views)) if j != i and dist(views[j][1], c) > 1e-3 * norm),
                    key=lambda j: dist(views[j][1], c))
    for j in others[:2]: pairs.add((min(i, j), max(i, j)))
for i, j in sorted(pairs): print(views[i][0] + ".tpfeat", views[j][0] + ".tpfeat")
PY
  "$tp" match "$work/$set/f"/*.tpfeat --pairs "$work/$set/pairs.txt" --verify essential \
    --intrinsics "$par" -o "$work/$set/m" --quiet ${extra[@]+"${extra[@]}"} > /dev/null
  cp "$par" "$work/$set/par.txt"
done
commit=$(git -C "$root" rev-parse --short=12 HEAD)
python3 - "$work" "$out" "$commit" ${extra[@]+"${extra[@]}"} <<'PY'
import json, math, sys, datetime
work, out, commit = sys.argv[1:4]
def mat(v): return [v[0:3], v[3:6], v[6:9]]
def mul(a, b): return [[sum(a[i][k] * b[k][j] for k in range(3)) for j in range(3)] for i in range(3)]
def tr(a): return [[a[j][i] for j in range(3)] for i in range(3)]
def mv(a, v): return [sum(a[i][k] * v[k] for k in range(3)) for i in range(3)]
def angle_deg(c): return math.degrees(math.acos(max(-1.0, min(1.0, c))))
result = {"tool": "bench/match_middlebury.sh", "match_options": sys.argv[4:], "date": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"),
          "commit": commit, "sets": {}}
print("%-18s %-34s %7s %7s %9s %9s" % ("set", "pair", "matches", "inliers", "rot err", "dir err"))
for s in ("templeSparseRing", "dinoSparseRing"):
    gt = {}
    for line in open(f"{work}/{s}/par.txt"):
        f = line.split()
        if len(f) < 22: continue
        v = list(map(float, f[1:]))
        gt[f[0]] = (mat(v[9:18]), v[18:21])
    summary = json.load(open(f"{work}/{s}/m/summary.json"))
    rows = []
    for p in summary["pairs"]:
        n1, n2 = p["features1"][:-7], p["features2"][:-7]
        (R1, t1), (R2, t2) = gt[n1], gt[n2]
        Rt = mul(R2, tr(R1))
        tt = [a - b for a, b in zip(t2, mv(Rt, t1))]
        row = {"pair": f"{n1}-{n2}", "matches": p["matches"], "inliers": p.get("inliers", 0),
               "verified": p.get("verified", False)}
        if p.get("verified") and "rotation_cam2_from_cam1" in p:
            Re = mat(p["rotation_cam2_from_cam1"]); te = p["translation_cam2_from_cam1"]
            d = mul(tr(Re), Rt)
            row["rotation_error_deg"] = angle_deg((d[0][0] + d[1][1] + d[2][2] - 1) / 2)
            nt = math.sqrt(sum(x * x for x in tt)); ne = math.sqrt(sum(x * x for x in te))
            row["translation_direction_error_deg"] = angle_deg(sum(a * b for a, b in zip(te, tt)) / (nt * ne)) if nt > 0 and ne > 0 else None
        rows.append(row)
        print("%-18s %-34s %7d %7d %9s %9s" % (s, row["pair"], row["matches"], row["inliers"],
              "%.3f" % row["rotation_error_deg"] if "rotation_error_deg" in row else "-",
              "%.3f" % row["translation_direction_error_deg"] if row.get("translation_direction_error_deg") is not None else "-"))
    ok = sum(1 for r in rows if r.get("rotation_error_deg", 1e9) <= 1.0)
    result["sets"][s] = {"pairs": rows, "within_1_degree": ok, "total": len(rows)}
    print(f"{s}: {ok} of {len(rows)} neighbouring pairs within 1 degree")
json.dump(result, open(out, "w"), indent=2)
print("wrote", out)
PY
