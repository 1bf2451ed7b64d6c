#!/usr/bin/env bash
# The screenshots of REPORT.html that the README shows (docs/report-*.png):
# minrepro (build/) on the bundled class4, image and audio examples and on
# the own-loop tagger (tests/fixtures/own_loop: shrink with no case.yaml),
# each archive's REPORT.html rendered by headless chromium. Needs a built
# tree (scripts/build.sh) and chromium (scripts/install-deps.sh).
#   scripts/report-screenshots.sh [OUT_DIR]   (default docs/)
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(realpath -m "${1:-docs}")"
python="${MINREPRO_PYTHON:-$PWD/.venv/bin/python}"
minrepro="$PWD/${MINREPRO_BUILD_DIR:-build}/minrepro"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
shot() {  # shot NAME HTML
  chromium --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$work/profile" \
    --window-size=1100,1500 --hide-scrollbars --screenshot="$out/report-$1.png" "file://$2" > /dev/null 2>&1
  echo "report-screenshots: $out/report-$1.png"
}
"$python" configs/examples/make_examples.py "$work/examples" > /dev/null
for name in class4 image audio; do
  "$minrepro" shrink -q --config "$work/examples/$name/case.yaml" --output "$work/$name.tar.gz" \
    --work-dir "$work/$name-work"
  shot "$name" "$work/$name-work/REPORT.html"
done
mkdir -p "$work/tagger"
cp tests/fixtures/own_loop/{tagger.py,step.py,make_batch.py} "$work/tagger/"
(cd "$work/tagger" && "$python" make_batch.py > /dev/null &&
  "$minrepro" shrink -q --batch saved.pt -- "$python" step.py {batch})
shot tokens "$(ls -d "$work"/tagger/minrepro-work*/REPORT.html | head -1)"
