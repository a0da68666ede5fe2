#!/usr/bin/env bash
# render_scene.sh TIEPOINT OUTDIR: `tiepoint render-scene` writes its views and cameras into
# a directory it creates, deterministically for a seed, and leaves no temporaries.
set -u
tp=$1; d=$2
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$d"
"$tp" render-scene -o "$d/a" --views 3 --width 160 --height 120 --seed 7 -q > "$d.stdout" \
  || fail "render-scene exited $?"
grep -q "3 views of 160 x 120" "$d.stdout" || fail "summary line: $(cat "$d.stdout")"
for f in view_000.png view_001.png view_002.png scene_par.txt; do
  [ -s "$d/a/$f" ] || fail "missing $f"
done
[ -e "$d/a/view_003.png" ] && fail "a fourth view was written"
ls -a "$d/a" | grep -q "tmp-" && fail "temporary left behind"
# PNG signature and IHDR: 160 x 120, 8-bit RGB.
python3 - "$d/a/view_000.png" <<'PY' || fail "view_000.png is not a 160 x 120 8-bit RGB PNG"
import struct, sys
b = open(sys.argv[1], 'rb').read(33)
ok = b[:8] == b'\x89PNG\r\n\x1a\n' and b[12:16] == b'IHDR' and struct.unpack('>IIBB', b[16:26]) == (160, 120, 8, 2)
sys.exit(0 if ok else 1)
PY
# The cameras: the count, then one line of a name and 21 numbers per view.
awk 'NR == 1 { if ($0 != "3") exit 1; next } { if (NF != 22 || $1 != sprintf("view_%03d.png", NR - 2)) exit 1 }
     END { if (NR != 4) exit 1 }' "$d/a/scene_par.txt" || fail "scene_par.txt is not 3 Middlebury lines"
# The same seed again gives the same bytes.
"$tp" render-scene -o "$d/b" --views 3 --width 160 --height 120 --seed 7 --threads 1 -q > /dev/null \
  || fail "second render exited $?"
for f in view_000.png view_001.png view_002.png scene_par.txt; do
  cmp -s "$d/a/$f" "$d/b/$f" || fail "$f differs between two renders with the same seed"
done
echo "ok"
