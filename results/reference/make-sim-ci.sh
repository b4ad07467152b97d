#!/usr/bin/env bash
# Regenerate the committed CI reference results/reference/sim-ci from the current simulator.
# Run from anywhere; takes about two and a half minutes. Do this (and commit the result) whenever the
# simulator's physics or the ci preset change on purpose; then re-check the noise with
#   python benchmarks/regress_noise.py --runs 5
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
specbench sweep --preset ci --results-dir "$work" --run-name ref
specbench reference update "$work/ref" --name sim-ci
specbench regress --reference results/reference/sim-ci --candidate "$work/ref"
echo "reference regenerated from $work/ref"
