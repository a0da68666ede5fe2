#!/usr/bin/env bash
# Regenerates the seed corpora under tests/fuzz/corpus/ from small slices of the real
# files in ../shared/data (or $TIEPOINT_SHARED_DATA). The output is committed; run this
# only to change the seeds. Needs python3, bzip2 and a C++ compiler with libpng/libjpeg.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
data=${TIEPOINT_SHARED_DATA:-$root/../shared/data}
corpus=$here/corpus
mkdir -p "$corpus"/{bal_text,bal_bz2,image_png,image_jpeg,image_pnm,features,matches,intrinsics,middlebury}

# Images: crops of real images in each layout (tests/fuzz/make_image_seeds.cc).
tool=$(mktemp -d)
trap 'rm -rf "$tool"' EXIT
g++ -std=c++17 -O1 -I"$root" "$here/make_image_seeds.cc" "$root/io/image.cc" \
  "$root/io/base/status.cc" "$root/io/base/atomic_file.cc" -lpng -ljpeg -o "$tool/make_image_seeds"
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
