#!/usr/bin/env bash
# roundtrip.sh TIEPOINT WORKDIR: synth -> ba (BAL .bz2, PLY, JSON report) -> ba again on
# the output; checks files, report keys, and that the second run starts at the first's end.
set -eu
tp=$1; dir=$2
rm -rf "$dir"; mkdir -p "$dir"
"$tp" synth --cameras 8 --points 300 --observations-per-point 4 --noise 0.5 --seed 4 \
  -o "$dir/in.bal" --truth "$dir/truth.bal" --quiet
"$tp" ba "$dir/in.bal" --solver cholmod --output "$dir/out.bal.bz2" --ply "$dir/out.ply" \
  --report "$dir/report.json" --quiet > "$dir/summary.txt"
cat "$dir/summary.txt"
for f in out.bal.bz2 out.ply report.json truth.bal; do [ -s "$dir/$f" ] || { echo "missing $f"; exit 1; }; done
for k in input solver threads num_cameras num_points num_observations initial_cost final_cost \
         iterations total_time_s termination trace linear_iterations lambda time_s; do
  grep -q "\"$k\"" "$dir/report.json" || { echo "report lacks \"$k\""; exit 1; }
done
grep -q "termination: CONVERGENCE" "$dir/summary.txt"
head -c 3 "$dir/out.ply" | grep -q ply
"$tp" ba "$dir/out.bal.bz2" --report "$dir/report2.json" --quiet > "$dir/summary2.txt"
final1=$(grep -o '"final_cost": [^,]*' "$dir/report.json" | awk '{print $2}')
initial2=$(grep -o '"initial_cost": [^,]*' "$dir/report2.json" | awk '{print $2}')
awk -v a="$final1" -v b="$initial2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-9 * a) }' \
  || { echo "re-read cost $initial2 differs from written $final1"; exit 1; }
echo "roundtrip ok: final $final1, re-read initial $initial2"
