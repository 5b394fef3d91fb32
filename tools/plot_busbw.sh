#!/usr/bin/env bash
# Plots busbw against message size from allreduce_2d's Google Benchmark JSON:
# one line per mesh dim and one per dim's raw baseline, as a PNG.
#
#   bazel run //bench:allreduce_2d -- --benchmark_out=/tmp/ar.json --benchmark_out_format=json
#   tools/plot_busbw.sh /tmp/ar.json /tmp/busbw.png
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 ALLREDUCE_2D.json OUT.png" >&2
  exit 2
fi
json=$1
png=$2
[ -f "$json" ] || { echo "plot_busbw: no such file: $json" >&2; exit 2; }
outdir=$(dirname -- "$png")
[ -d "$outdir" ] && [ -w "$outdir" ] || {
  echo "plot_busbw: cannot write $png: $outdir is not a writable directory" >&2
  exit 2
}
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT

# One data file per dim: "bytes busbw raw_busbw", from the runs named
# allreduce_2d/<dim>/<bytes>.
python3 - "$json" "$data" <<'PY'
import json, sys, collections
try:
    doc = json.load(open(sys.argv[1]))
except ValueError as e:
    sys.exit("plot_busbw: %s is not Google Benchmark JSON: %s" % (sys.argv[1], e))
rows = collections.defaultdict(list)
for b in doc.get("benchmarks", []):
    parts = b["name"].split("/")
    if (b.get("run_type", "iteration") != "iteration" or len(parts) < 3
            or parts[0] != "allreduce_2d" or "busbw_GBps" not in b):
        continue
    rows[parts[1]].append((int(parts[2]), b["busbw_GBps"], b["raw_busbw_GBps"]))
if not rows:
    sys.exit("plot_busbw: no allreduce_2d runs with busbw in " + sys.argv[1])
with open(sys.argv[2] + "/dims", "w") as dims:
    for dim, points in sorted(rows.items()):
        dims.write(dim + "\n")
        with open(f"{sys.argv[2]}/{dim}.dat", "w") as f:
            for p in sorted(points):
                f.write("%d %g %g\n" % p)
PY

plot=""
while read -r dim; do
  [ -n "$plot" ] && plot+=", "
  plot+="'$data/$dim.dat' using 1:2 with linespoints title 'devmesh $dim'"
  plot+=", '$data/$dim.dat' using 1:3 with lines dashtype 2 title 'raw $dim'"
done < "$data/dims"

gnuplot <<GP
set terminal pngcairo size 900,560
set output '$png'
set title 'all-reduce busbw per mesh dim (devmesh vs raw group)'
set xlabel 'message size (bytes)'
set ylabel 'busbw (GB/s)'
set logscale x 2
set format x '%.0b%BB'
set key top left
set grid
plot $plot
GP
echo "plot_busbw: wrote $png"
