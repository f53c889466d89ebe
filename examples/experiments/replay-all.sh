#!/usr/bin/env bash
# Regenerate every result in examples/experiments/results (about 5 minutes).
set -euo pipefail
cd "$(dirname "$0")"
R=results
for spec in blog-same-demands blog-heterogeneous blog-heterogeneous-2500; do
  drfmesos experiment run "$spec.yaml" --time-scale 0.05 --out "$R/$spec-live"
  drfmesos simulate "$spec.yaml" --out "$R/$spec-sim"
done
drfmesos simulate paper-7.1.yaml --out "$R/paper-7.1-sim"
for policy in naive-hdrf hdrf; do
  drfmesos simulate lecture-naive-hdrf.yaml --policy "$policy" --out "$R/lecture-naive-hdrf-$policy-sim"
done
for policy in flat hdrf; do
  drfmesos simulate lecture-flattening.yaml --policy "$policy" --out "$R/lecture-flattening-$policy-sim"
done
python compare.py --out "$R"
rm -rf "$R"/*/run "$R"/*/stats-*.json
for spec in paper-9-18 lecture-mirrored lecture-collusion-honest lecture-collusion-lying; do
  drfmesos simulate "$spec.yaml" --out "$R/$spec-sim"
done
for policy in asset drf; do drfmesos simulate paper-asset.yaml --policy "$policy" --out "$R/paper-asset-$policy-sim"; done
for policy in fifo drf; do
  drfmesos simulate lecture-fifo-morning.yaml --policy "$policy" --out "$R/lecture-fifo-morning-$policy-sim"
done
for spec in paper-ceei paper-ceei-lying; do
  drfmesos simulate "$spec.yaml" --policy ceei --out "$R/$spec-ceei-sim"
done
drfmesos simulate lecture-morning-preemption.yaml --out "$R/lecture-morning-preemption-sim"
drfmesos simulate lecture-morning-preemption.yaml --preemption oldest --out "$R/lecture-morning-preemption-oldest-sim"
drfmesos simulate lecture-morning-preemption.yaml --preemption off --out "$R/lecture-morning-off-sim"
drfmesos experiment run lecture-morning-preemption.yaml --time-scale 0.05 --out "$R/lecture-morning-preemption-live"
drfmesos experiment run lecture-morning-preemption.yaml --time-scale 0.05 --preemption oldest --out "$R/lecture-morning-preemption-oldest-live"
drfmesos experiment run lecture-morning-preemption.yaml --time-scale 0.05 --preemption off --out "$R/lecture-morning-off-live"
rm -rf "$R"/*/run "$R"/*/stats-*.json
# real command tasks contending for CPU: as root, with writable cgroups (about 3 minutes)
for isolation in cgroups posix; do
  drfmesos experiment run "cpu-contention-$isolation.yaml" --broker mosquitto --out "$R/cpu-contention-$isolation-live"
done
rm -rf "$R"/*/run "$R"/*/stats-*.json "$R"/cpu-contention-*/{running_tasks,dominant_share,utilisation}.png
