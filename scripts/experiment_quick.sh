#!/usr/bin/env bash
# Run (or continue) the quick-preset experiment in the background from a snapshot of the committed code, so that
# edits in the working tree during the hours it runs cannot change it half-way. Progress: $OUT/progress.log
# (one line per cell), $OUT.<seeds>.log (everything), $OUT/results.md (tables, rewritten after every cell).
#
#   scripts/experiment_quick.sh                            # experiments/quick, seeds 0,1,2 in one process
#   SEED_GROUPS="0 1 2" scripts/experiment_quick.sh        # one process per seed (all share $OUT)
#   OUT=/tmp/x SEED_GROUPS=0 TRANSFER=0 scripts/experiment_quick.sh
#   OUT=/tmp/y METHODS=sft,coda SET=targeted_per_family=24 NICE=19 scripts/experiment_quick.sh   # bigger rounds
#
# The transfer cells run in the first seed group's process (they reuse its CoDA cells).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$REPO/experiments/quick}
SEED_GROUPS=${SEED_GROUPS:-0,1,2}
TRANSFER=${TRANSFER:-1}
SET=${SET:-}
NICE=${NICE:-10}
METHODS=${METHODS:-sft,domain_rand,uniform,success_guided,no_memory,coda,sparse,potential_from_task,no_refine,frozen_critic_select,gen_memory_only,train_memory_only}
COMMIT=$(git -C "$REPO" rev-parse --short HEAD)
SNAP=${SNAP:-/tmp/coda-snapshot-$COMMIT}
COMMIT=${SNAP##*/coda-snapshot-}   # a given SNAP (e.g. to continue on the code an experiment started with) names its commit
if [ ! -d "$SNAP" ] && [ "$COMMIT" != "$(git -C "$REPO" rev-parse --short HEAD)" ]; then
  echo "SNAP=$SNAP does not exist and is not a snapshot of HEAD" >&2; exit 2
fi
if [ ! -d "$SNAP" ]; then
  mkdir -p "$SNAP.tmp" && git -C "$REPO" archive HEAD | tar -x -C "$SNAP.tmp" && mv "$SNAP.tmp" "$SNAP"
fi
mkdir -p "$OUT"
cd "$SNAP"
first=1
for seeds in $SEED_GROUPS; do
  RESUME=""
  [ -f "$OUT/experiment.json" ] && RESUME="--resume"
  EXTRA=""
  [ "$first" = 1 ] && [ "$TRANSFER" = 1 ] && EXTRA="--transfer --transfer-seeds ${seeds%%,*},"
  [ -n "$SET" ] && EXTRA="$EXTRA --set $SET"
  tag=${seeds//,/-}
  CODA_COMMIT=$COMMIT OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONPATH="$SNAP" nohup nice -n "$NICE" \
    "$REPO/.venv/bin/python" -m coda.cli experiment --methods "$METHODS" --seeds "$seeds," --preset quick \
    --out "$OUT" $EXTRA $RESUME >> "$OUT.s$tag.log" 2>&1 &
  echo $! > "$OUT.s$tag.pid"
  echo "started seeds $seeds: pid $(cat "$OUT.s$tag.pid") from $SNAP (commit $COMMIT), log $OUT.s$tag.log"
  # the next process continues the experiment this one created
  for _ in $(seq 120); do [ -f "$OUT/experiment.json" ] && break; sleep 1; done
  first=0
done
echo "progress: tail -f $OUT/progress.log"
