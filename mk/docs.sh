#!/usr/bin/env bash
# make docs: the Doxygen site in docs/html from the public headers, the README pages and docs/*.md.
# Any Doxygen warning fails the build.
set -euo pipefail
cd "$(dirname "$0")/.."
inputs="README.md docs docs/results common/include sim/README.md"
for d in labs/[0-9][0-9]_* final; do
  [ -d "$d" ] || continue
  [ -f "$d/README.md" ] && inputs="$inputs $d/README.md"
  [ -d "$d/include" ] && inputs="$inputs $d/include"
done
inputs=$(for i in $inputs; do [ -e "$i" ] && printf '%s ' "$i"; done)
mkdir -p docs/html
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! { cat docs/Doxyfile; echo "INPUT = $inputs"; echo "USE_MDFILE_AS_MAINPAGE = $PWD/README.md"; } | doxygen - >"$log" 2>&1; then
  cat "$log"
  echo "docs: Doxygen reported warnings or errors (treated as errors)" >&2
  exit 1
fi
if [ -s "$log" ]; then cat "$log"; fi
# The results pages link their raw logs and show their charts (docs/results/<run>/*.log, *.csv, *.png)
# relative to the page: copy them. (No IMAGE_PATH: Doxygen then leaves ![..](<run>/x.png) as written.)
# The README (the site's main page) shows a chart by its path in the repository: copy them there too.
mkdir -p docs/html/docs/results
for d in docs/results/*/; do [ -d "$d" ] && cp -r "$d" docs/html/ && cp -r "$d" docs/html/docs/results/; done
echo "docs: site built in docs/html/index.html from: $inputs"
