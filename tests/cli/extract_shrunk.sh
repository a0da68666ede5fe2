#!/usr/bin/env bash
# extract_shrunk.sh TIEPOINT OUTDIR: `extract --max-image-size` runs SIFT on the image shrunk
# to fit and writes the features in the full image's pixels: inside the full frame, and
# where the full-size run finds the same blobs (those larger than the shrinking's blur).
set -u
tp=$1; d=$2
rm -rf "$d"; mkdir -p "$d"
fail() { echo "FAIL: $*"; exit 1; }
"$tp" render-scene -o "$d/scene" --views 2 --width 640 --height 480 -q > /dev/null || fail "render-scene"
img=$d/scene/view_000.png
"$tp" extract "$img" --upsample --txt -o "$d/full" > /dev/null || fail "extract at full size"
"$tp" extract "$img" --upsample --txt --max-image-size 320 -o "$d/half" > "$d/stdout" || fail "extract --max-image-size 320"
grep -q "640 x 480 (SIFT at 320 x 240)" "$d/stdout" || fail "no 'SIFT at 320 x 240' in: $(cat "$d/stdout")"
python3 - "$d/full/view_000.png.txt" "$d/half/view_000.png.txt" <<'PY' || fail "features of the shrunk image are not in the full image's pixels"
import math, sys
def load(path):
    return [tuple(map(float, line.split()[:3])) for line in list(open(path))[1:]]
full, half = load(sys.argv[1]), load(sys.argv[2])
xs = [k[0] for k in half]; ys = [k[1] for k in half]
print(len(full), "features at full size,", len(half), "shrunk; x", min(xs), max(xs), "y", min(ys), max(ys))
if not (min(xs) >= -0.5 and max(xs) <= 639.5 and min(ys) >= -0.5 and max(ys) <= 479.5): sys.exit(1)
if not (max(xs) > 480 and max(ys) > 360): sys.exit(1)  # the 640x480 frame, not 320x240
big = [k for k in half if k[2] > 4]
found = sum(1 for k in big if any(math.hypot(k[0] - f[0], k[1] - f[1]) < 0.1 * k[2] and abs(f[2] / k[2] - 1) < 0.2
                                  for f in full))
print(len(big), "of scale over 4 px,", found, "of them at a full-size feature of the same scale")
sys.exit(0 if big and found >= 0.6 * len(big) else 1)
PY
echo ok
