#!/usr/bin/env bash
# Regenerates the seed corpora under tests/fuzz/corpus/ from small slices of the real
# files in ../shared/data (or $TIEPOINT_SHARED_DATA). The output is committed; run this
# only to change the seeds. Needs python3, bzip2 and a C++ compiler with libpng/libjpeg/libtiff.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
data=${TIEPOINT_SHARED_DATA:-$root/../shared/data}
corpus=$here/corpus
mkdir -p "$corpus"/{bal_text,bal_bz2,image_png,image_jpeg,image_pnm,image_tiff,features,matches,intrinsics,middlebury}

# Images: crops of real images in each layout (tests/fuzz/make_image_seeds.cc).
tool=$(mktemp -d)
trap 'rm -rf "$tool"' EXIT
g++ -std=c++17 -O1 -I"$root" "$here/make_image_seeds.cc" "$root/io/image.cc" \
  "$root/io/base/status.cc" "$root/io/base/atomic_file.cc" "$root/io/base/input_file.cc" -lpng -ljpeg -ltiff \
  -o "$tool/make_image_seeds"
"$tool/make_image_seeds" "$data" "$corpus" >/dev/null

# BAL: the GTSAM subsets whole, a slice of problem-49 (3 cameras, the points two of them
# see), a few defects; the same compressed (one stream, two concatenated streams).
cp --no-preserve=mode "$data"/bal/tiny_gtsam/dubrovnik-{1-1,3-7}-pre.txt "$corpus/bal_text/"
python3 - "$data/bal/problem-49-7776-pre.txt" "$corpus/bal_text" <<'PY'
import sys
src, out = sys.argv[1], sys.argv[2]
tok = open(src).read().split()
nc, np_, no = int(tok[0]), int(tok[1]), int(tok[2])
obs = [(int(tok[3+4*i]), int(tok[4+4*i]), tok[5+4*i], tok[6+4*i]) for i in range(no)]
base = 3 + 4 * no
cams = [tok[base + 9*c: base + 9*c + 9] for c in range(nc)]
pts = [tok[base + 9*nc + 3*p: base + 9*nc + 3*p + 3] for p in range(np_)]
keep_c = [0, 1, 2]
seen = {}
for c, p, x, y in obs:
    if c in keep_c: seen.setdefault(p, []).append((c, x, y))
keep_p = [p for p in sorted(seen) if len(seen[p]) >= 2][:6]
lines = []
for j, p in enumerate(keep_p):
    for c, x, y in seen[p]: lines.append(f"{keep_c.index(c)} {j} {x} {y}")
with open(out + "/problem-49-slice.txt", "w") as f:
    f.write(f"{len(keep_c)} {len(keep_p)} {len(lines)}\n" + "\n".join(lines) + "\n")
    for c in keep_c: f.write("\n".join(cams[c]) + "\n")
    for p in keep_p: f.write("\n".join(pts[p]) + "\n")
PY
printf '1 1 1\n0 0 -1.5e+02 2.5e1\n0 0 0 0 0 -1 500 0 0\n1 2 3\n' > "$corpus/bal_text/minimal.txt"
printf '2 3 4\n0 0 1 2\n1 1 3 4\n0 2 5 6\n1 0 7 8\n' > "$corpus/bal_text/truncated.txt"
bzip2 -1 -c "$corpus/bal_text/problem-49-slice.txt" > "$corpus/bal_bz2/problem-49-slice.bz2"
bzip2 -1 -c "$corpus/bal_text/minimal.txt" > "$corpus/bal_bz2/minimal.bz2"
{ printf '1 1 1\n0 0 1 2\n' | bzip2 -1 -c; printf '0 0 0 0 0 -1 500 0 0\n1 2 3\n' | bzip2 -1 -c; } \
  > "$corpus/bal_bz2/two_streams.bz2"

# Middlebury cameras: the first three views of each ring.
for ring in templeSparseRing/templeSR dinoSparseRing/dinoSR; do
  f="$data/multiview/middlebury/${ring}_par.txt"
  { echo 3; sed -n 2,4p "$f"; } > "$corpus/middlebury/$(basename "$ring")_par.txt"
done
# Intrinsics tables: the same par layout, and NAME fx fy cx cy lines (KITTI, fountain).
cp "$corpus/middlebury/templeSR_par.txt" "$corpus/intrinsics/templeSR_par.txt"
printf '# KITTI odometry 00\n000000.png 718.856 718.856 607.1928 185.2157\n* 718.856 718.856 607.1928 185.2157\n' \
  > "$corpus/intrinsics/kitti.txt"
python3 - "$data/multiview/strecha_fountain_pair" "$corpus/intrinsics/fountain.txt" <<'PY'
import sys
d, out = sys.argv[1], sys.argv[2]
with open(out, "w") as f:
    for n in (1, 2):
        k = [float(v) for v in open(f"{d}/fountain{n}.K").read().split()]
        f.write(f"fountain{n}.jpg {k[0]!r} {k[4]!r} {k[2]!r} {k[5]!r}  # from fountain{n}.K\n")
PY

# Features: the first keypoints of a real SIFT .key file (Lowe's format: y x scale ori,
# 128 descriptor values) as .tpfeat; matches between them, without and with a model.
python3 - "$data/multiview/gtsam_balbianello" "$corpus" <<'PY'
import gzip, math, struct, sys
d, out = sys.argv[1], sys.argv[2]
def keys(n, count):
    tok = gzip.open(f"{d}/BalbianelloMedium-{n}.key.gz", "rt").read().split()
    ks = []
    for i in range(count):
        b = 2 + i * 132
        y, x, s, o = (float(v) for v in tok[b:b+4])
        ks.append((x, y, s, o % (2 * math.pi), bytes(int(v) for v in tok[b+4:b+132])))
    return ks
def write_feat(path, ks):
    with open(path, "wb") as f:
        f.write(b"TPFEAT01" + struct.pack("<IIQ", 1, 128, len(ks)))
        for x, y, s, o, _ in ks: f.write(struct.pack("<ffff", x, y, s, o))
        for *_, desc in ks: f.write(desc)
k1, k2 = keys(1, 3), keys(2, 2)
write_feat(f"{out}/features/balbianello-1-3kp.tpfeat", k1)
write_feat(f"{out}/features/balbianello-2-2kp.tpfeat", k2)
write_feat(f"{out}/features/empty.tpfeat", [])
def dist(a, b): return sum((p - q) ** 2 for p, q in zip(a[4], b[4]))
def write_match(path, model, inliers, matrix, rot, t, rms):
    n1, n2 = b"BalbianelloMedium-1.jpg.tpfeat", b"BalbianelloMedium-2.jpg.tpfeat"
    m = [(0, 1), (2, 0)]
    h = b"TPMATCH1" + struct.pack("<IIIIIIQQQQ", 1, model, 1 if model else 0, len(n1), len(n2),
                                   120 if model else 0, 3, 2, len(m), sum(inliers))
    h += struct.pack("<9d", *matrix) + struct.pack("<9d", *rot) + struct.pack("<3d", *t) + struct.pack("<d", rms)
    body = b"".join(struct.pack("<III", i, j, dist(k1[i], k2[j])) for i, j in m) + bytes(inliers)
    open(path, "wb").write(h + n1 + n2 + body)
I = (1, 0, 0, 0, 1, 0, 0, 0, 1)
write_match(f"{out}/matches/unverified.tpmatch", 0, [0, 0], (0,) * 9, I, (0, 0, 0), 0.0)
write_match(f"{out}/matches/essential.tpmatch", 3, [1, 0], (0, -0.1, 0.2, 0.1, 0, -0.9, -0.2, 0.9, 0.05),
            (0.995, -0.0998, 0, 0.0998, 0.995, 0, 0, 0, 1), (0.6, 0, 0.8), 0.42)
PY
du -sh "$corpus"

# COLMAP models (text: cameras NUL images NUL points3D; binary: two uint16 lengths, then the
# three files) and track files: a slice of the Bundler reconstruction of Balbianello (3 of
# its 5 images, 640x427, and the first points all three see), in COLMAP's conventions.
mkdir -p "$corpus"/{colmap_text,colmap_binary,track_file,batch_jobs}
python3 - "$data/multiview/gtsam_balbianello/Balbianello.out" "$corpus" <<'PY'
import math, struct, sys
src, out = sys.argv[1], sys.argv[2]
lines = [l for l in open(src).read().splitlines() if not l.startswith("#")]
nc, np_ = map(int, lines[0].split())
row = lambda i: [float(v) for v in lines[i].split()]
cams = []
for c in range(nc):
    b = 1 + 5 * c
    f, k1, k2 = row(b)
    R = [row(b + 1), row(b + 2), row(b + 3)]
    t = row(b + 4)
    # Bundler looks down -z with y up; COLMAP down +z with y down: flip rows 2 and 3.
    R = [R[0], [-v for v in R[1]], [-v for v in R[2]]]
    t = [t[0], -t[1], -t[2]]
    cams.append((f, k1, k2, R, t))
pts = []
i = 1 + 5 * nc
for p in range(np_):
    xyz, rgb = row(i), [int(v) for v in lines[i + 1].split()]
    v = lines[i + 2].split()
    views = [(int(v[1 + 4 * k]), int(v[2 + 4 * k]), float(v[3 + 4 * k]), float(v[4 + 4 * k]))
             for k in range(int(v[0]))]
    pts.append((xyz, rgb, views))
    i += 3
keep = [0, 1, 2]
W, H = 640, 427
def quat(R):  # w, x, y, z of a rotation matrix (w > 0)
    w = math.sqrt(max(0.0, 1 + R[0][0] + R[1][1] + R[2][2])) / 2
    return (w, (R[2][1] - R[1][2]) / (4 * w), (R[0][2] - R[2][0]) / (4 * w), (R[1][0] - R[0][1]) / (4 * w))
chosen = [p for p in pts if all(any(c == k for c, *_ in p[2]) for k in keep)][:5]
points2D = {k: [] for k in keep}
tracks = []
for pid, (xyz, rgb, views) in enumerate(chosen, start=1):
    tr = []
    for c, key, x, y in views:
        if c not in keep: continue
        tr.append((c + 1, len(points2D[c])))
        points2D[c].append((x + W / 2, -y + H / 2, pid))
    tracks.append((pid, xyz, rgb, tr))
for k in keep:  # a point2D without a 3D point too
    points2D[k].append((12.5, 30.25, None))
g = lambda v: repr(float(v))
def text_model(models):
    cam = "# Camera list with one line of data per camera:\n#   CAMERA_ID, MODEL, WIDTH, HEIGHT, PARAMS[]\n"
    cam += f"# Number of cameras: {len(keep)}\n"
    img = f"# Image list with two lines of data per image:\n# Number of images: {len(keep)}, mean observations per image: 3\n"
    for k in keep:
        f, k1, k2, R, t = cams[k]
        model, params = models[k]
        cam += f"{k + 1} {model} {W} {H} " + " ".join(g(v) for v in params) + "\n"
        q = quat(R)
        img += f"{k + 1} " + " ".join(g(v) for v in (*q, *t)) + f" {k + 1} BalbianelloMedium-{k + 1}.jpg\n"
        img += " ".join(f"{g(x)} {g(y)} {pid if pid else -1}" for x, y, pid in points2D[k]) + "\n"
    pt = f"# 3D point list with one line of data per point:\n# Number of points: {len(tracks)}, mean track length: 3\n"
    for pid, xyz, rgb, tr in tracks:
        pt += f"{pid} " + " ".join(g(v) for v in xyz) + " " + " ".join(map(str, rgb)) + " 0.5 "
        pt += " ".join(f"{i} {j}" for i, j in tr) + "\n"
    return cam, img, pt
radial = {k: ("RADIAL", (cams[k][0], W / 2, H / 2, cams[k][1], cams[k][2])) for k in keep}
mixed = {0: ("SIMPLE_PINHOLE", (cams[0][0], W / 2, H / 2)),
         1: ("PINHOLE", (cams[1][0], cams[1][0] * 1.001, W / 2, H / 2)),
         2: ("SIMPLE_RADIAL", (cams[2][0], W / 2, H / 2, cams[2][1]))}
model_ids = {"SIMPLE_PINHOLE": 0, "PINHOLE": 1, "SIMPLE_RADIAL": 2, "RADIAL": 3}
def binary_model(models):
    cam = struct.pack("<Q", len(keep))
    img = struct.pack("<Q", len(keep))
    for k in keep:
        f, k1, k2, R, t = cams[k]
        model, params = models[k]
        cam += struct.pack("<IiQQ", k + 1, model_ids[model], W, H) + struct.pack(f"<{len(params)}d", *params)
        img += struct.pack("<I7dI", k + 1, *quat(R), *t, k + 1) + f"BalbianelloMedium-{k + 1}.jpg".encode() + b"\0"
        img += struct.pack("<Q", len(points2D[k]))
        for x, y, pid in points2D[k]:
            img += struct.pack("<ddQ", x, y, pid if pid else 2**64 - 1)
    pt = struct.pack("<Q", len(tracks))
    for pid, xyz, rgb, tr in tracks:
        pt += struct.pack("<Q3d3Bd", pid, *xyz, *rgb, 0.5) + struct.pack("<Q", len(tr))
        pt += b"".join(struct.pack("<II", i, j) for i, j in tr)
    return cam, img, pt
for name, models in (("balbianello-radial", radial), ("balbianello-mixed", mixed)):
    c, i, p = text_model(models)
    open(f"{out}/colmap_text/{name}.txt3", "w").write(c + "\0" + i + "\0" + p)
    c, i, p = binary_model(models)
    open(f"{out}/colmap_binary/{name}.bin3", "wb").write(struct.pack("<HH", len(c), len(i)) + c + i + p)
# An empty model, as COLMAP writes one.
open(f"{out}/colmap_text/empty.txt3", "w").write(
    "# Camera list with one line of data per camera:\n# Number of cameras: 0\n\0"
    "# Image list with two lines of data per image:\n# Number of images: 0, mean observations per image: 0\n\0"
    "# 3D point list with one line of data per point:\n# Number of points: 0, mean track length: 0\n")
open(f"{out}/colmap_binary/empty.bin3", "wb").write(struct.pack("<HH", 8, 8) + bytes(24))
# Track files: the same points' observations in all five images, frame = image index.
with open(f"{out}/track_file/balbianello.txt", "w") as f:
    f.write("# track_id frame x y (pixels, (0, 0) the centre of the top-left pixel)\n")
    for tid, (xyz, rgb, views) in enumerate(pts[:8]):
        for c, key, x, y in views:
            f.write(f"{tid} {c} {x + W / 2 - 0.5:.3f} {-y + H / 2 - 0.5:.3f}\n")
open(f"{out}/track_file/windows.txt", "w").write("# CRLF\r\n0 0 1.5 2.5\r\n0 1 3e2 -4.25e-1\r\n\r\n1\t0\t7\t8\r\n")
PY

# Batch job files: the README's forms (jobs, defaults, matrix with a name template, each
# kind), over the fuzz target's fixture directory (tests/fuzz/batch_jobs_fuzz.cc).
cat > "$corpus/batch_jobs/jobs.json" <<'JSON'
{
  "defaults": {"threads": 1, "max-iterations": 30},
  "jobs": [
    {"name": "a-huber", "kind": "ba", "input": "a.txt", "solver": "cholmod", "loss": "huber:1",
     "output": "refined.bal", "fix-intrinsics": true, "cg-eta": 0.05},
    {"name": "temple", "kind": "reconstruct", "images": ["img*.png", "sub/d.png"],
     "single-camera": true, "intrinsics": "par.txt", "pairs": "sequential:2", "seed": 7},
    {"name": "bench-all", "kind": "bench", "problems": ["*.txt", "b.txt.bz2"],
     "solvers": "pcg-schur,cholmod@cuda", "repetitions": 2, "comment": "two of each"}
  ]
}
JSON
cat > "$corpus/batch_jobs/matrix.json" <<'JSON'
{"matrix": [
  {"kind": "ba", "name": "{input}-{solver}", "input": ["*.txt", "b.txt.bz2"],
   "solver": ["cholmod", "pcg-schur"], "ply": "points.ply"},
  {"kind": "reconstruct", "images": [["img1.png", "img2.png"], ["sub/*.png"]],
   "single-camera": [true, false], "pairs": "pairs.txt", "tracks": "tracks.txt"}
]}
JSON
cat > "$corpus/batch_jobs/errors.json" <<'JSON'
{"jobs": [
  {"name": "typo", "kind": "ba", "input": "a.txt", "slover": "cholmod"},
  {"name": "typo", "kind": "ba", "input": "a.txt", "--solver": "x"},
  {"name": "wrong-type", "kind": "ba", "input": "a.txt", "max-iterations": "ten", "threads": -2},
  {"name": "bad name", "kind": "synth"},
  {"name": "m", "kind": "ba", "input": "missing.txt", "report": "r.json"}
 ],
 "matrix": {"kind": "bench", "problems": ["nothing*.txt"], "solvers": ["cholmod"]},
 "extra": 1}
JSON

# EXIF (io/exif.h): SOI + one APP1 + EOI. The EXIF block of a real camera photo (Balbianello,
# a Canon), and hand-written ones: each route to the prior, both byte orders, a rejected value.
mkdir -p "$corpus/exif"
python3 - "$data/multiview/gtsam_balbianello/BalbianelloMedium-3.jpg" "$corpus/exif" <<'PY'
import struct, sys
src, out = sys.argv[1], sys.argv[2]
def jpeg(app1): return b"\xff\xd8" + app1 + b"\xff\xd9"
def app1(body): return b"\xff\xe1" + struct.pack(">H", len(body) + 2) + body
d = open(src, "rb").read()
i = d.find(b"Exif\x00\x00")
n = struct.unpack(">H", d[i - 2:i])[0]
open(out + "/camera.jpg", "wb").write(jpeg(d[i - 4:i - 4 + 2 + n]))
SHORT, LONG, RATIONAL = 3, 4, 5
def exif(tags, big=False):
    e = ">" if big else "<"
    ifd = 8 + 2 + 12 + 4
    t = (b"MM" if big else b"II") + struct.pack(e + "HI", 42, 8)
    t += struct.pack(e + "HHHII", 1, 0x8769, LONG, 1, ifd) + struct.pack(e + "I", 0)
    data_at = ifd + 2 + 12 * len(tags) + 4
    t += struct.pack(e + "H", len(tags))
    rationals = b""
    for tag, typ, a, b in tags:
        if typ == RATIONAL:
            t += struct.pack(e + "HHII", tag, typ, 1, data_at + len(rationals))
            rationals += struct.pack(e + "II", a, b)
        elif typ == SHORT:
            t += struct.pack(e + "HHIHH", tag, typ, 1, a, 0)
        else:
            t += struct.pack(e + "HHII", tag, typ, 1, a)
    t += struct.pack(e + "I", 0) + rationals
    return app1(b"Exif\x00\x00" + t)
F, F35, XRES, UNIT, PX = 0x920a, 0xa405, 0xa20e, 0xa210, 0xa002
seeds = {
    "f35.jpg": [(F35, SHORT, 50, 0)],
    "focal_plane_cm.jpg": [(F, RATIONAL, 45, 10), (XRES, RATIONAL, 2000, 1), (UNIT, SHORT, 3, 0)],
    "focal_plane_inch_resized_be.jpg": ([(F, RATIONAL, 5, 1), (XRES, RATIONAL, 5080, 1), (PX, LONG, 1280, 0)], True),
    "both_f35_absurd.jpg": [(F, RATIONAL, 45, 10), (XRES, RATIONAL, 2000, 1), (UNIT, SHORT, 3, 0), (F35, SHORT, 60000, 0)],
    "zero_denominator.jpg": [(F, RATIONAL, 5, 0), (XRES, RATIONAL, 5080, 1)],
    "no_focal.jpg": [(PX, LONG, 640, 0)],
}
for name, spec in seeds.items():
    tags, big = spec if isinstance(spec, tuple) else (spec, False)
    open(out + "/" + name, "wb").write(jpeg(exif(tags, big)))
PY

# Pairs files (io/pairs_file.h): names of the fuzz target's fixed images (a.png, cam0/a.png,
# a: a stem two images share; b, c), comments, blank lines, CRLF, a repeated pair.
mkdir -p "$corpus/pairs_file"
printf '# pairs\n\na.png b.png\ncam0/a.png c   # after a pair\nb c.png\nc b\n' > "$corpus/pairs_file/names.txt"
printf 'a.jpg\tb\r\n\r\n#only\r\nc a.jpg\r\n' > "$corpus/pairs_file/crlf_tabs.txt"
printf 'a b\n' > "$corpus/pairs_file/ambiguous_stem.txt"
printf 'a.png b c\nb\n' > "$corpus/pairs_file/three_names.txt"
