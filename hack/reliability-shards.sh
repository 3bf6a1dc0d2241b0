#!/usr/bin/env bash
# The convergence harness's generated histories split over SHARDS pytest processes running at once
# (docs/reliability.md, "The convergence harness on the real server"): one process needs about two
# hours for 200 real-lane histories, each history being seconds of real API-server work spent mostly
# waiting. Each process runs its own real cluster (hack/real-cluster.sh, ~400 MB each) and only the
# histories of its shard (INTERLOCK_RELIABILITY_SHARD=i/N: a digest of the history, so no two shards
# run the same one).
#
#   hack/reliability-shards.sh [SHARDS] [HISTORIES] [OUT]     (defaults: 4 200 build/reliability)
#
# Lane: INTERLOCK_TEST_CLUSTER from the environment (the Makefile sets real). Writes
# OUT/shard-I.log (pytest output) and OUT/histories.jsonl (one line per history: its steps,
# outcome, seconds, events, error), prints the totals, and fails if any shard failed.
set -u
shards=${1:-4}
histories=${2:-200}
out=${3:-build/reliability}
python=${PYTHON:-.venv/bin/python}
mkdir -p "$out"
: > "$out/histories.jsonl"
per=$(( (histories + shards - 1) / shards ))
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait' INT TERM
for ((i = 0; i < shards; i++)); do
	INTERLOCK_RELIABILITY_SHARD="$i/$shards" INTERLOCK_RELIABILITY_EXAMPLES="$per" \
	INTERLOCK_RELIABILITY_LOG="$out/histories.jsonl" \
		"$python" -m pytest -q -p no:cacheprovider --timeout=7200 \
		"tests/reliability/test_reliability_convergence.py::test_every_output_equals_what_the_final_state_gives" \
		> "$out/shard-$i.log" 2>&1 &
	pids+=("$!")
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
"$python" - "$out/histories.jsonl" <<'PY'
import collections, json, sys
lines = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8")]
outcomes = collections.Counter(line["outcome"] for line in lines)
distinct = len({json.dumps(line["history"]) for line in lines})
print(f"{len(lines)} histories ({distinct} distinct): {outcomes['passed']} passed, {outcomes['failed']} failed")
events = collections.Counter(e for line in lines for e in line.get("events", []))
for text, count in events.most_common():
    print(f"  {100 * count / max(len(lines), 1):5.1f}%  {text}")
PY
exit $status
