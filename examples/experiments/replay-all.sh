#!/usr/bin/env bash
# Make the published results in examples/experiments/results again:
#   ./replay-all.sh                    everything: simulations, compare.py's tables, and the
#                                      live runs (about 10 minutes; the CPU-contention runs
#                                      need root and writable cgroups)
#   ./replay-all.sh --simulated        the simulations and compare.py's tables only (about
#                                      two minutes): the figures a test holds to the code
#   ./replay-all.sh ... --out DIR      write into DIR instead of results/
# tests/test_published_results.py runs `--simulated --out` and compares what it made with
# the published files, so a change that moves a simulated figure fails CI until this is run.
set -euo pipefail
cd "$(dirname "$0")"
R=results LIVE=1
while [ $# -gt 0 ]; do
  case "$1" in
    --simulated) LIVE=0 ;;
    --out) R="$2"; shift ;;
    *) echo "usage: $0 [--simulated] [--out DIR]" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$R"
sim() { drfmesos simulate "$@" >/dev/null; }

for spec in blog-same-demands blog-heterogeneous blog-heterogeneous-2500; do
  sim "$spec.yaml" --out "$R/$spec-sim"
done
sim paper-7.1.yaml --out "$R/paper-7.1-sim"
for policy in naive-hdrf hdrf; do
  sim lecture-naive-hdrf.yaml --policy "$policy" --out "$R/lecture-naive-hdrf-$policy-sim"
done
for policy in flat hdrf; do
  sim lecture-flattening.yaml --policy "$policy" --out "$R/lecture-flattening-$policy-sim"
done
for spec in paper-9-18 lecture-mirrored lecture-collusion-honest lecture-collusion-lying; do
  sim "$spec.yaml" --out "$R/$spec-sim"
done
for policy in asset drf; do sim paper-asset.yaml --policy "$policy" --out "$R/paper-asset-$policy-sim"; done
for policy in fifo drf; do
  sim lecture-fifo-morning.yaml --policy "$policy" --out "$R/lecture-fifo-morning-$policy-sim"
done
for spec in paper-ceei paper-ceei-lying; do
  sim "$spec.yaml" --policy ceei --out "$R/$spec-ceei-sim"
done
sim lecture-morning-preemption.yaml --out "$R/lecture-morning-preemption-sim"
sim lecture-morning-preemption.yaml --preemption oldest --out "$R/lecture-morning-preemption-oldest-sim"
sim lecture-morning-preemption.yaml --preemption off --out "$R/lecture-morning-off-sim"
python compare.py --out "$R" >/dev/null
[ "$LIVE" = 1 ] || exit 0

for spec in blog-same-demands blog-heterogeneous blog-heterogeneous-2500; do
  drfmesos experiment run "$spec.yaml" --time-scale 0.05 --out "$R/$spec-live"
done
drfmesos experiment run lecture-morning-preemption.yaml --time-scale 0.05 --out "$R/lecture-morning-preemption-live"
drfmesos experiment run lecture-morning-preemption.yaml --time-scale 0.05 --preemption oldest --out "$R/lecture-morning-preemption-oldest-live"
drfmesos experiment run lecture-morning-preemption.yaml --time-scale 0.05 --preemption off --out "$R/lecture-morning-off-live"
rm -rf "$R"/*/run "$R"/*/stats-*.json
# real command tasks contending for CPU: as root, with writable cgroups (about 3 minutes)
for isolation in cgroups posix; do
  drfmesos experiment run "cpu-contention-$isolation.yaml" --broker mosquitto --out "$R/cpu-contention-$isolation-live"
done
rm -rf "$R"/*/run "$R"/*/stats-*.json "$R"/cpu-contention-*/{running_tasks,dominant_share,utilisation}.png
