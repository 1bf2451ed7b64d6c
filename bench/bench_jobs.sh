#!/usr/bin/env bash
# Whole-process timing: minrepro shrink with --jobs 1 and --jobs 2 on a case
# whose trials sleep (bench/sleepy_step.py), measured in one run; checks that
# the results are identical. Usage: bench/bench_jobs.sh [BUILD_DIR] [SLEEP_S]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
# The Python whose torch the build is against makes the cases and runs the archives.
py=$("$build/minrepro" --version | sed -n 's/^PyTorch from: //p')
sleep_s=${2:-0.5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$py" "$here/../configs/examples/make_examples.py" "$work" >/dev/null
cp "$here/sleepy_step.py" "$work/class4/"
for mode in true false; do
  cat > "$work/class4/sleepy.yaml" <<YAML
batch: batch.pt
samples: {tensors: {input: 0, target: 0}, ids: sample_id}
trial:
  command: [$py, "{case_dir}/sleepy_step.py", "{batch}", "10313", "$sleep_s"]
flaky: {enabled: $mode}
reducers: [samples]
YAML
  declare -A secs ids trials rounds
  for jobs in 1 2; do
    start=$(date +%s.%N)
    "$build/minrepro" shrink --config "$work/class4/sleepy.yaml" --jobs "$jobs" --quiet \
      --output "$work/out-$jobs.tar.gz" --work-dir "$work/w-$jobs-$mode"
    end=$(date +%s.%N)
    secs[$jobs]=$(echo "$end - $start" | bc -l)
    ids[$jobs]=$(tar xzf "$work/out-$jobs.tar.gz" -O REPORT.md | grep "Kept sample ids")
    trials[$jobs]=$(tar xzf "$work/out-$jobs.tar.gz" -O REPORT.md | grep -o "^- [0-9]* trials" | grep -o "[0-9]*")
    rounds[$jobs]=$(tar xzf "$work/out-$jobs.tar.gz" -O REPORT.md | grep -o "^- [0-9]* trials in [0-9]* rounds" | grep -o "[0-9]* rounds" | grep -o "[0-9]*")
  done
  same=$([ "${ids[1]}" == "${ids[2]}" ] && echo yes || echo NO)
  printf "flaky handling %-5s  jobs=1: %6.1f s (%s trials, %s rounds)  jobs=2: %6.1f s (%s trials, %s rounds)  ratio %.2f (rounds %.2f)  same result: %s  %s\n" \
    "$mode" "${secs[1]}" "${trials[1]}" "${rounds[1]}" "${secs[2]}" "${trials[2]}" "${rounds[2]}" \
    "$(echo "${secs[2]} / ${secs[1]}" | bc -l)" "$(echo "${rounds[2]} / ${rounds[1]}" | bc -l)" "$same" "${ids[1]}"
done
