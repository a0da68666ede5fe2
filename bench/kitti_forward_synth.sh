#!/usr/bin/env bash
# kitti_forward_synth.sh OUT.json [SEEDS] [SIGMAS]: is KITTI's frame-to-frame bound (issue 16:
# rotation within 0.1 deg, direction of travel within 2 deg) within what `tiepoint
# reconstruct --tracks` resolves on that motion? The KITTI excerpt's own true poses (frames
# 0-4), a street of points (road, facades 7 m to either side, far points), observed with
# Gaussian noise of SIGMA px and written as a `tiepoint track` file; blank 1241x376 frames
# give the sizes. Mapped with KITTI's intrinsics and compared by bench/sfm_eval --gt-kitti
# against the poses that made the observations. Beside it, the real frames with both front
# ends (SIFT, and `tiepoint track`), and the ground truth's own step rotations per axis.
# Needs ../shared/data (skips without it), a build in build/.
set -eu
out=${1:?usage: kitti_forward_synth.sh OUT.json [SEEDS] [SIGMAS]}
seeds=${2:-"1 2 3"}
sigmas=${3:-"0 0.15 0.5"}
root=$(cd "$(dirname "$0")/.." && pwd)
tp=$root/build/tiepoint; ev=$root/build/bench/sfm_eval
K=${TIEPOINT_SHARED_DATA:-$root/../shared/data}/multiview/kitti_odometry_00_excerpt
[ -d "$K" ] || { echo "skipped: no $K"; exit 0; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
echo "* 718.856 718.856 607.1928 185.2157" > "$work/intr.txt"
head -n 5 "$K/poses/00.txt" > "$work/gt.txt"

gen() {  # gen SEED SIGMA DIR
  python3 - "$1" "$2" "$3" "$work/gt.txt" <<'PY'
import math, os, random, struct, sys, zlib
seed, sigma, out, gt = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4]
rng = random.Random(seed)
os.makedirs(out, exist_ok=True)
poses = [list(map(float, l.split())) for l in open(gt)]
fx = fy = 718.856; cx, cy, W, H = 607.1928, 185.2157, 1241, 376
pts = []
for j in range(3000):
    z = rng.uniform(6, 60)
    if j % 3 == 0: pts.append((rng.uniform(-10, 10), 1.65, z))                      # road
    elif j % 3 == 1: pts.append((rng.choice([-7, 7]) + rng.gauss(0, 0.3), rng.uniform(-4, 1.65), z))  # facades
    else: pts.append((rng.uniform(-40, 40), rng.uniform(-10, 1), rng.uniform(60, 200)))  # far
lines = []
for k, T in enumerate(poses):  # T: camera to world, 3x4 row-major
    R = [T[0:3], T[4:7], T[8:11]]; t = (T[3], T[7], T[11])
    for j, X in enumerate(pts):
        d = [X[i] - t[i] for i in range(3)]
        c = [sum(R[r][i] * d[r] for r in range(3)) for i in range(3)]  # R^T (X - t)
        if c[2] <= 1: continue
        u = fx * c[0] / c[2] + cx + rng.gauss(0, sigma)
        v = fy * c[1] / c[2] + cy + rng.gauss(0, sigma)
        if 2 < u < W - 3 and 2 < v < H - 3: lines.append(f"{j} {k} {u:.5f} {v:.5f}")
open(f"{out}/tracks.txt", "w").write("\n".join(lines) + "\n")
raw = b"".join(b"\x00" + bytes([128]) * W for _ in range(H))
ch = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
png = b"\x89PNG\r\n\x1a\n" + ch(b"IHDR", struct.pack(">IIBBBBB", W, H, 8, 0, 0, 0, 0)) + ch(b"IDAT", zlib.compress(raw)) + ch(b"IEND", b"")
for k in range(len(poses)): open(f"{out}/{k:06d}.png", "wb").write(png)
PY
}

runs=()
for sg in $sigmas; do
  for s in $seeds; do
    d=$work/s$s-$sg; gen "$s" "$sg" "$d"
    "$tp" reconstruct --tracks "$d/tracks.txt" "$d"/0*.png -o "$d/rec" --pairs sequential:4 --intrinsics "$work/intr.txt" -q --threads 2 >/dev/null
    "$ev" "$d/rec/sparse/0" --gt-kitti "$work/gt.txt" > "$d/eval.json"
    runs+=("synthetic seed $s sigma $sg:$d/eval.json")
  done
done
"$tp" reconstruct "$K"/sequences/00/image_0/*.png -o "$work/sift" --intrinsics "$work/intr.txt" --pairs exhaustive -q --threads 2 >/dev/null
"$tp" track "$K"/sequences/00/image_0/*.png -o "$work/tracks.txt" -q >/dev/null
"$tp" reconstruct --tracks "$work/tracks.txt" "$K"/sequences/00/image_0/*.png -o "$work/trk" --pairs sequential:4 \
  --intrinsics "$work/intr.txt" -q --threads 2 >/dev/null
for m in sift trk; do "$ev" "$work/$m/sparse/0" --gt-kitti "$K/poses/00.txt" > "$work/$m.eval.json"; done
runs+=("KITTI frames, SIFT front end:$work/sift.eval.json" "KITTI frames, tiepoint track:$work/trk.eval.json")

python3 - "$out" "$work" "$(git -C "$root" describe --always --dirty)" "${runs[@]}" <<'PY'
import json, math, sys, datetime
out, work, commit, runs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
def rot(line):
    T = list(map(float, line.split())); return [T[0:3], T[4:7], T[8:11]]
def mul(A, B): return [[sum(A[i][k] * B[k][j] for k in range(3)) for j in range(3)] for i in range(3)]
def tr(A): return [list(r) for r in zip(*A)]
def rotvec(R):  # degrees about camera x, y, z
    w = [(R[2][1] - R[1][2]) / 2, (R[0][2] - R[2][0]) / 2, (R[1][0] - R[0][1]) / 2]
    s = math.sqrt(sum(x * x for x in w)); th = math.atan2(s, (R[0][0] + R[1][1] + R[2][2] - 1) / 2)
    return [round(math.degrees(x / s * th), 4) if s else 0.0 for x in w]
gt = [tr(rot(l)) for l in open(f"{work}/gt.txt")]  # world to camera
def model_poses(d):  # name -> (world-to-camera R, centre)
    P = {}
    for l in open(f"{d}/sparse/0/images.txt"):
        f = l.split()
        if l.startswith("#") or len(f) != 10: continue
        w, x, y, z = map(float, f[1:5]); n = math.sqrt(w*w + x*x + y*y + z*z); w, x, y, z = w/n, x/n, y/n, z/n
        R = [[1-2*(y*y+z*z), 2*(x*y-w*z), 2*(x*z+w*y)], [2*(x*y+w*z), 1-2*(x*x+z*z), 2*(y*z-w*x)], [2*(x*z-w*y), 2*(y*z+w*x), 1-2*(x*x+y*y)]]
        t = list(map(float, f[5:8]))
        P[f[9]] = (R, [-sum(R[r][i] * t[r] for r in range(3)) for i in range(3)])
    return [P["%06d.png" % k] for k in range(5)]
def direction(R1, C1, C2):  # direction of travel in the first camera's frame: degrees toward +x (right) and toward +y (down)
    d = [sum(R1[i][j] * (C2[j] - C1[j]) for j in range(3)) for i in range(3)]
    return [round(math.degrees(math.atan2(d[0], d[2])), 2), round(math.degrees(math.atan2(d[1], d[2])), 2)]
res = []
for r in runs:
    name, path = r.rsplit(":", 1); e = json.load(open(path)); c = e["consecutive"]
    res.append({"run": name, "registered": e["registered"], "points": e["points"],
                "mean_reprojection_error_px": round(e["mean_reprojection_error_px"], 4),
                "step_rotation_error_deg": [round(x, 4) for x in c["rotation_errors_deg"]],
                "step_direction_error_deg": [round(x, 3) for x in c["translation_direction_errors_deg"]],
                "ground_truth_consistency_median_px": {k: round(v["median_px"], 4) for k, v in e["ground_truth_consistency"].items()}})
axes = {"ground_truth": [rotvec(mul(gt[k + 1], tr(gt[k]))) for k in range(4)]}
gtc = [[float(x) for x in l.split()][3::4] for l in open(f"{work}/gt.txt")]
dirs = {"ground_truth": [direction(gt[k], gtc[k], gtc[k + 1]) for k in range(4)]}
for m in ["sift", "trk"]:
    P = model_poses(f"{work}/{m}")
    axes[m] = [rotvec(mul(P[k + 1][0], tr(P[k][0]))) for k in range(4)]
    dirs[m] = [direction(P[k][0], P[k][1], P[k + 1][1]) for k in range(4)]
json.dump({"tool": "bench/kitti_forward_synth.sh (tiepoint reconstruct --tracks, bench/sfm_eval --gt-kitti)", "issue": 16,
           "date": datetime.date.today().isoformat(), "commit": commit,
           "device": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?") + ", CPU only, --threads 2",
           "runs": res, "step_rotation_axis_angle_deg_camera_xyz": axes,
           "step_direction_azimuth_elevation_deg": dirs}, open(out, "w"), indent=1)
for r in res: print(r["run"], r["step_rotation_error_deg"], r["step_direction_error_deg"])
for k, v in axes.items(): print("steps (x, y, z deg)", k, v)
for k, v in dirs.items(): print("directions (azimuth, elevation deg)", k, v)
PY
