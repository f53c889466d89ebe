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
python compare.py --out "$R"
rm -rf "$R"/*/run "$R"/*/stats-*.json
