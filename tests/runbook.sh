#!/usr/bin/env bash
# A runbook as an on-call script would write it: it reads only JSON output (with
# jq) and exit codes, never the human lines. Driven by tests/runbook.rs, which
# holds the tracefs lock and sets TRACE_RECIPE (the binary) and
# TRACE_RECIPE_PATH (the recipe folder). Run in an empty scratch folder.
set -euo pipefail
tr="${TRACE_RECIPE:?the trace-recipe binary}"
fail() { echo "runbook: FAIL: $*" >&2; exit 1; }

# 1. List the recipes and pick one that passes `check` on this kernel.
recipe=$("$tr" list --format json | jq -r '[.recipes[] | select(.passes_check)][0].name')
[ -n "$recipe" ] && [ "$recipe" != null ] || fail "no recipe passes check here"
echo "runbook: picked $recipe"

# 2-3. Run it by name; read the output folder from the JSON.
"$tr" run "$recipe" --format json --quiet --duration 20s > run1.json 2> run1.err \
  || fail "run $recipe exited $?: $(cat run1.err)"
[ ! -s run1.err ] || fail "--quiet printed on stderr: $(cat run1.err)"
out=$(jq -r .output run1.json)
[ -d "$out" ] || fail "output folder $out from the JSON does not exist"
[ -s "$out/trace.dat" ] || fail "$out/trace.dat is missing or empty"
[ "$(jq -r .exit_code run1.json)" = 0 ] || fail "exit_code in the JSON is not 0"
[ "$(jq -r .bundle run1.json)" = null ] || fail "bundle is not null"
jq -e '.total_events > 0 and (.events | length) > 0' run1.json > /dev/null \
  || fail "the run recorded no events: $(cat run1.json)"
"$tr" status --exit-code --format json > /dev/null || fail "status --exit-code fails after a clean run"

# 4. A second run, killed with SIGKILL together with its guard (and workload).
"$tr" run "$recipe" --format json --quiet -o run2-out -- sleep 30 > run2.json 2> run2.err &
run=$!
for _ in $(seq 100); do
  if "$tr" status --format json | jq -e '.trace_recipe.in_use | length > 0' > /dev/null; then
    break
  fi
  sleep 0.1
done
"$tr" status --format json | jq -e '.trace_recipe.in_use | length > 0' > /dev/null \
  || fail "the second run never showed up as in use"
children=$(ps -o pid= --ppid "$run" | tr -s ' \n' ' ')
[ -n "$children" ] || fail "the run has no guard process"
# shellcheck disable=SC2086
kill -KILL "$run" $children
wait "$run" 2> /dev/null || true

# 5. Something was left behind: status --exit-code fails.
if "$tr" status --exit-code --format json > status-left.json; then
  fail "status --exit-code passes after a SIGKILLed run and guard"
fi
jq -e '.left_behind == true and (.trace_recipe.left_behind | length) > 0' status-left.json > /dev/null \
  || fail "status JSON does not list what was left behind"

# 6. reset --dry-run says what it would remove and changes nothing; reset removes it.
"$tr" reset --dry-run --format json > dry.json || fail "reset --dry-run failed"
jq -e '.dry_run == true and (.actions | length) > 0 and all(.actions[]; .ok)' dry.json > /dev/null \
  || fail "reset --dry-run lists nothing: $(cat dry.json)"
if "$tr" status --exit-code --format json > /dev/null; then
  fail "reset --dry-run removed something"
fi
"$tr" reset --format json > reset.json || fail "reset failed: $(cat reset.json)"
jq -e '.dry_run == false and (.actions | length) > 0 and all(.actions[]; .ok)' reset.json > /dev/null \
  || fail "reset did not act: $(cat reset.json)"

# 7. Nothing is left behind now.
"$tr" status --exit-code --format json > status-after.json \
  || fail "status --exit-code still fails after reset: $(cat status-after.json)"
echo "runbook: ok"
