#!/usr/bin/env bash
# Run (or continue) the quick-preset experiment in the background from a snapshot of the committed code, so that
# edits in the working tree during the hours it runs cannot change it half-way. Progress: $OUT/progress.log
# (one line per cell), $OUT.log (everything), $OUT/results.md (tables, rewritten after every cell).
#
#   scripts/experiment_quick.sh                 # experiments/quick, 3 seeds
#   OUT=/tmp/x SEEDS=1 scripts/experiment_quick.sh
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$REPO/experiments/quick}
SEEDS=${SEEDS:-3}
METHODS=${METHODS:-sft,domain_rand,uniform,success_guided,no_memory,coda,sparse}
COMMIT=$(git -C "$REPO" rev-parse --short HEAD)
SNAP=${SNAP:-/tmp/coda-snapshot-$COMMIT}
if [ ! -d "$SNAP" ]; then
  mkdir -p "$SNAP.tmp" && git -C "$REPO" archive HEAD | tar -x -C "$SNAP.tmp" && mv "$SNAP.tmp" "$SNAP"
fi
mkdir -p "$OUT"
RESUME=""
[ -f "$OUT/experiment.json" ] && RESUME="--resume"
cd "$SNAP"
CODA_COMMIT=$COMMIT OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONPATH="$SNAP" nohup nice -n 10 \
  "$REPO/.venv/bin/python" -m coda.cli experiment --methods "$METHODS" --seeds "$SEEDS" --preset quick \
  --out "$OUT" --transfer --transfer-seeds 1 $RESUME >> "$OUT.log" 2>&1 &
echo $! > "$OUT.pid"
echo "started pid $(cat "$OUT.pid") from $SNAP (commit $COMMIT): tail -f $OUT/progress.log $OUT.log"
