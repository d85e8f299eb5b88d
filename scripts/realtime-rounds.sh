#!/usr/bin/env bash
# The real-time and streaming tests, round after round, with both cores
# loaded by two busy loops: what "flaky is broken" is judged by (the record
# is in docs/benchmarks.md). Stops at the first failing round, keeping its
# logs, or after ROUNDS rounds.
#   scripts/realtime-rounds.sh [BUILD_DIR] [ROUNDS] [OUT_DIR]
set -uo pipefail
build=${1:-build}
rounds=${2:-30}
out=${3:-$build/realtime-rounds}
mkdir -p "$out"
rm -f "$out"/*.log "$out"/summary
load=()
for _ in 1 2; do
    yes >/dev/null &
    load+=($!)
done
trap 'kill "${load[@]}" 2>/dev/null' EXIT
# Everything that runs against a clock or a live consumer. (The chunked
# streaming equalities, Backends/NeuralVocoder.chunked_*, StreamLayers.* and
# SpectralVocoder.chunked_*, compute the same floats whatever the load: they
# are run by the normal test command, not here.)
engine_filter='Engine.*:BlockScheduler.*:RealtimePull*:RealtimeGuard*:MelStreamOffline.*'
engine_filter+=':MelStreamCancel.*:MelStreamFaults.*:MelStreamCApi.*:SpectralEngine.*:CApi.*'
engine_filter+=':Models/MelStream.*'
echo "start $(date -u +%FT%TZ) cpu: $(lscpu | sed -n 's/^Model name: *//p')" >"$out/summary"
for i in $(seq 1 "$rounds"); do
    t0=$(date +%s)
    "$build/tests/etude_tests_engine" --gtest_filter="$engine_filter" >"$out/engine_$i.log" 2>&1
    e=$?
    "$build/tests/etude_tests_audio_io" --gtest_filter='Jack*' >"$out/jack_$i.log" 2>&1
    j=$?
    passed=$(cat "$out/engine_$i.log" "$out/jack_$i.log" | grep -c '^\[       OK')
    echo "round $i engine=$e jack=$j $(($(date +%s) - t0))s load=$(cut -d' ' -f1 /proc/loadavg) $passed passed" >>"$out/summary"
    if [ $e -ne 0 ] || [ $j -ne 0 ]; then
        echo "FAILED in round $i (logs kept in $out)" >>"$out/summary"
        cat "$out/summary"
        exit 1
    fi
    rm -f "$out/engine_$i.log" "$out/jack_$i.log"
done
echo "end $(date -u +%FT%TZ)" >>"$out/summary"
cat "$out/summary"
