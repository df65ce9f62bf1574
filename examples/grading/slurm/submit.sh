#!/usr/bin/env bash
# Queue the grading of a class on Slurm: N array tasks, then the merge once they are all done.
#
#   SUBMISSIONS=/path/to/class SHARDS=8 bash examples/grading/slurm/submit.sh
#
# Optional: GRADES (output folder, default grades), PYTHON (default .venv/bin/python).
set -euo pipefail
: "${SUBMISSIONS:?set SUBMISSIONS to the class folder (one sub-folder per student)}"
SHARDS="${SHARDS:-8}"
here="$(cd "$(dirname "$0")" && pwd)"
export SUBMISSIONS SHARDS
array=$(sbatch --parsable --export=ALL --array="0-$((SHARDS - 1))" "$here/grade-array.sbatch")
merge=$(sbatch --parsable --export=ALL --dependency="afterany:${array%%;*}" "$here/merge.sbatch")
echo "queued: grading array ${array%%;*} ($SHARDS shards), merge $merge; results in ${GRADES:-grades}/merged"
