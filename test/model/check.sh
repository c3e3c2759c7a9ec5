#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Model-check the arm/trywait/signal wakeup protocol (arm_trywait.pml) and sleeping on the port
# (sleep_on_port.pml) with
# spin: the correct protocol (and its harmless variations) must verify with
# an exhaustive search and no errors; every broken variant must produce a
# counterexample of the lost-wakeup kind (an invalid end state: the consumer
# blocked in epoll_wait with an undelivered event and nothing left to run).
#
# Usage: bash test/model/check.sh
# Env:   SPIN=/path/to/spin CC=gcc   tool overrides
#        MODEL_JOBS=N                parallel pan runs (default: nproc, max 4)
#        MODEL_TRAIL=1               print the counterexample trail of every
#                                    broken variant (spin -t -p)
# Exit:  0 all expectations met, 1 some expectation failed,
#        (a missing spin or C compiler fails: scripts/setup.sh installs both).

set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SPIN=${SPIN:-spin}
CC=${CC:-gcc}

for tool in "$SPIN" "$CC"; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "model: SKIP: '$tool' not found (Debian: apt-get install spin gcc)" >&2
		exit 1
	fi
done

if [[ -n ${MODEL_JOBS:-} ]]; then
	jobs_max=$MODEL_JOBS
else
	jobs_max=$(nproc 2>/dev/null || echo 2)
	if ((jobs_max > 4)); then jobs_max=4; fi
fi
if ((jobs_max < 1)); then jobs_max=1; fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dpfab-model.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# name | spin -D flags | expectation (verify / counterexample) | model file (arm_trywait.pml)
variants=(
	"correct||verify"
	"PRODUCER_FAST_PATH|-DPRODUCER_FAST_PATH|verify"
	"NO_PRODUCER_FENCE|-DNO_PRODUCER_FENCE|verify"
	"two-consumers|-DNCONS=2|verify"
	"NO_CONSUMER_FENCE|-DNO_CONSUMER_FENCE|counterexample"
	"NO_PRODUCER_FENCE+PRODUCER_FAST_PATH|-DNO_PRODUCER_FENCE -DPRODUCER_FAST_PATH|counterexample"
	"NO_FENCE|-DNO_FENCE|counterexample"
	"NO_DRAIN_BEFORE_CHECK|-DNO_DRAIN_BEFORE_CHECK|counterexample"
	"two-consumers+NO_DRAIN_BEFORE_CHECK|-DNCONS=2 -DNO_DRAIN_BEFORE_CHECK|counterexample"
	# Sleeping on the port (sleep_on_port.pml): the kick's arming and draining, two sleepers.
	"port:correct||verify|sleep_on_port.pml"
	"port:ARM_AFTER_POLL|-DARM_AFTER_POLL|counterexample|sleep_on_port.pml"
	"port:DRAIN_AFTER_ARM|-DDRAIN_AFTER_ARM|counterexample|sleep_on_port.pml"
	"port:A3_GIVES_UP|-DA3_GIVES_UP|counterexample|sleep_on_port.pml"
	"port:BUSY_IS_SAFE|-DBUSY_IS_SAFE|counterexample|sleep_on_port.pml"
	"port:NO_REARM|-DNO_REARM|counterexample|sleep_on_port.pml"
	# Parking a worker lcore and the wakeup thread's watch (park_watch.pml).
	"park+watch:correct||verify|park_watch.pml"
	"park:CHECK_FIRST|-DPARK_CHECK_FIRST|counterexample|park_watch.pml"
	"park:NO_RECHECK|-DPARK_NO_RECHECK|counterexample|park_watch.pml"
	"watch:CHECK_FIRST|-DWATCH_CHECK_FIRST|counterexample|park_watch.pml"
	"watch:NO_RECHECK|-DWATCH_NO_RECHECK|counterexample|park_watch.pml"
)

# Notes on the pan flags:
#   -DSAFETY     safety only: assertions + invalid end states (no LTL/cycles)
#   -DCOLLAPSE   lossless state compression (the search stays exhaustive;
#                hash-compact/bitstate modes are deliberately NOT used)
#   -DMEMLIM     hard cap, so a model change that explodes fails loudly
#   -m20000      search depth bound; real depth is ~200, and a truncated
#                search is treated as a failure below
#   -w22         2^22-slot hash table (largest variant stores ~2.7M states)
#   -c1          stop at the first error (counterexample variants)
pan_cflags=(-O2 -w -DSAFETY -DCOLLAPSE -DMEMLIM=1024)
pan_args=(-m20000 -w22 -c1)

# run_variant IDX: writes $tmp/IDX.line (one result line) and $tmp/IDX.rc
run_variant() {
	local idx=$1 name defs expect file dir out line rc=0
	IFS='|' read -r name defs expect file <<<"${variants[$idx]}"
	file=${file:-arm_trywait.pml}
	dir="$tmp/$idx"
	mkdir -p "$dir"
	cp "$here/$file" "$dir/$file"
	out="$dir/pan.out"
	local -a d=()
	if [[ -n $defs ]]; then read -r -a d <<<"$defs"; fi

	if ! (cd "$dir" && "$SPIN" "${d[@]}" -a "$file" >spin.log 2>&1); then
		line="model FAIL: $name: spin -a failed:"$'\n'"$(cat "$dir/spin.log")"
		rc=1
	elif ! (cd "$dir" && "$CC" "${pan_cflags[@]}" -o pan pan.c >cc.log 2>&1); then
		line="model FAIL: $name: compiling pan failed:"$'\n'"$(cat "$dir/cc.log")"
		rc=1
	else
		(cd "$dir" && ./pan "${pan_args[@]}" >"$out" 2>&1) || true
		local errors states depth
		errors=$(sed -n 's/.*errors: \([0-9][0-9]*\).*/\1/p' "$out" | tail -n1)
		states=$(sed -n 's/^ *\([0-9][0-9]*\) states, stored.*/\1/p' "$out" | tail -n1)
		depth=$(sed -n 's/.*invalid end state (at depth \([0-9]*\)).*/\1/p' "$out" | head -n1)
		if [[ -z $errors || -z $states ]]; then
			line="model FAIL: $name: could not parse pan output:"$'\n'"$(cat "$out")"
			rc=1
		elif [[ $expect == verify ]]; then
			if [[ $errors != 0 ]]; then
				line="model FAIL: $name: expected to verify, pan found $errors error(s):"$'\n'"$(cat "$out")"
				if [[ -f $dir/$file.trail ]]; then
					line+=$'\n'"counterexample (spin -t -p, last 80 lines):"
					line+=$'\n'"$(cd "$dir" && "$SPIN" "${d[@]}" -t -p "$file" 2>&1 | tail -n 80)"
				fi
				rc=1
			elif grep -q -e 'max search depth too small' -e 'out of memory' \
				-e 'Bit statespace' -e 'Hash-Compact' "$out" ||
				! grep -q 'Full statespace search' "$out"; then
				line="model FAIL: $name: search was not exhaustive:"$'\n'"$(cat "$out")"
				rc=1
			else
				line="model ok: $name verified ($states states, exhaustive, 0 errors)"
			fi
		else
			if [[ $errors == 0 ]]; then
				line="model FAIL: $name: expected a counterexample, but the model verified ($states states)"
				rc=1
			elif [[ -z $depth ]]; then
				# An error, but not the lost-wakeup deadlock (e.g. an
				# assertion): the model is broken in some other way.
				line="model FAIL: $name: expected a lost-wakeup (invalid end state), got:"$'\n'"$(cat "$out")"
				rc=1
			else
				line="model ok: $name counterexample found (lost wakeup: invalid end state at depth $depth, $states states)"
				if [[ ${MODEL_TRAIL:-0} == 1 ]]; then
					line+=$'\n'"$(cd "$dir" && "$SPIN" "${d[@]}" -t -p -g "$file" 2>&1)"
				fi
			fi
		fi
	fi
	printf '%s\n' "$line" >"$tmp/$idx.line"
	echo "$rc" >"$tmp/$idx.rc"
}

start=$SECONDS
running=0
for idx in "${!variants[@]}"; do
	run_variant "$idx" &
	running=$((running + 1))
	if ((running >= jobs_max)); then
		wait -n || true
		running=$((running - 1))
	fi
done
wait

status=0
for idx in "${!variants[@]}"; do
	if [[ -f $tmp/$idx.line ]]; then
		cat "$tmp/$idx.line"
		[[ $(cat "$tmp/$idx.rc") == 0 ]] || status=1
	else
		echo "model FAIL: ${variants[$idx]%%|*}: no result"
		status=1
	fi
done

if ((status == 0)); then
	echo "model: all ${#variants[@]} variants as expected ($((SECONDS - start))s)"
else
	echo "model: FAILED ($((SECONDS - start))s)"
fi
exit "$status"
