#!/usr/bin/env bash
# Builds the libFuzzer targets (test/fuzz, clang + ASan + UBSan) in build-fuzz and runs them.
#
#   scripts/fuzz.sh [--smoke | --seconds N | --replay] [target...]
#
# --smoke (default)  every target over its seed corpus, then 20 s of mutation each (CI);
# --seconds N        N seconds of mutation per target (the long run recorded in RESULTS.md);
# --replay           runs each target once over its saved findings (test/fuzz/findings/<target>),
#                    with exact number comparison, to check a fix; fails while any still fails.
# Targets run one at a time (libFuzzer, one process). New corpus entries go to
# build-fuzz/fuzz-corpus/<target> (scratch, not the repo); a crash, leak, timeout (10 s per input)
# or sanitizer report is written to build-fuzz/fuzz-findings/<target>/ and makes the script fail
# after all targets ran. Logs: build-fuzz/fuzz-logs/<target>.log.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=smoke
seconds=20
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --smoke) mode=smoke; seconds=20 ;;
    --seconds) mode=run; seconds="$2"; shift ;;
    --replay) mode=replay ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1") ;;
  esac
  shift
done

all_targets=(label_selector field_selector continue_token protobuf_decoder merge_patch json_patch
             strategic_merge_patch wal json_body server_side_apply service_account_token
             token_file cel_lexer cel_expression ip_address)
[ ${#targets[@]} -eq 0 ] && targets=("${all_targets[@]}")

# Longest input per target: query values and tokens are short, documents and segments are not.
max_len() {
  case "$1" in
    label_selector|field_selector|continue_token|cel_lexer|cel_expression|ip_address) echo 4096 ;;
    *) echo 65536 ;;
  esac
}

build=build-fuzz
generator=()
command -v ninja >/dev/null && [ ! -f "$build/Makefile" ] && generator=(-G Ninja)
cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_CXX_COMPILER="${KWATCH_FUZZ_CXX:-clang++}" \
  -DKWATCH_BUILD_FUZZERS=ON -DKWATCH_BUILD_SERVER=OFF -DKWATCH_BUILD_TESTS=OFF >/dev/null

cmake --build "$build" -j 2 --target "${targets[@]/%/_fuzz}"

export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:symbolize=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

failed=()
printf '%-22s %12s %8s %7s %7s %7s\n' target execs exec/s cov ft corpus > "$build/fuzz-summary.txt"
for t in "${targets[@]}"; do
  bin="$build/test/fuzz/${t}_fuzz"
  seeds=test/fuzz/corpus/$t
  dict=test/fuzz/$t.dict
  scratch="$build/fuzz-corpus/$t"
  artifacts="$build/fuzz-findings/$t"
  log="$build/fuzz-logs/$t.log"
  mkdir -p "$scratch" "$artifacts" "$(dirname "$log")"

  if [ "$mode" = replay ]; then
    found=(test/fuzz/findings/"$t"/*)
    [ -e "${found[0]}" ] || continue
    echo "== $t: replaying ${#found[@]} saved finding(s)"
    : >"$log"
    for f in "${found[@]}"; do
      if ! KWATCH_FUZZ_EXACT_NUMBERS=1 "$bin" -runs=1 "$f" >>"$log" 2>&1; then
        failed+=("$t: $f still fails (see $log)")
      fi
    done
    continue
  fi

  args=(-max_total_time="$seconds" -max_len="$(max_len "$t")" -timeout=10 -rss_limit_mb=2048
        -print_final_stats=1 -artifact_prefix="$artifacts/")
  [ -f "$dict" ] && args+=(-dict="$dict")
  echo "== $t: seeds + ${seconds}s"
  status=0
  "$bin" "${args[@]}" "$scratch" "$seeds" >"$log" 2>&1 || status=$?

  last=$(grep -E '^#[0-9]+' "$log" | tail -n 1 || true)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9A-Za-z]*\).*/\1/p' <<<"$last")
  printf '%-22s %12s %8s %7s %7s %7s\n' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" \
    "${corp:-?}" >> "$build/fuzz-summary.txt"

  if [ "$status" -ne 0 ]; then
    repro=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
    echo "fuzz.sh: FINDING in $t (exit $status); reproducer: ${repro:-none written}; log: $log"
    grep -m 1 -E 'ERROR: (AddressSanitizer|libFuzzer|LeakSanitizer)|runtime error|property violated' \
      "$log" || true
    [ -n "$repro" ] && echo "  reproduce: $bin $repro"
    failed+=("$t: ${repro:-$log}")
  fi
done

cat "$build/fuzz-summary.txt"
if [ ${#failed[@]} -gt 0 ]; then
  printf 'fuzz.sh: findings:\n'
  printf '  %s\n' "${failed[@]}"
  exit 1
fi
echo "fuzz.sh: no findings"
