#!/usr/bin/env bash
# make docs: the Doxygen site in docs/html from the public headers, the README pages and docs/*.md.
# Any Doxygen warning fails the build.
set -euo pipefail
cd "$(dirname "$0")/.."
# The site's page order is the input order: the labs first, in order, then final/, the sim and docs/*.md.
# Every results page sits under one "Results" page (written below, as Doxygen subpages).
inputs="README.md"
for d in labs/[0-9][0-9]_* final; do [ -f "$d/README.md" ] && inputs="$inputs $d/README.md"; done
inputs="$inputs sim/README.md docs docs/results"
tmp=$(mktemp -d)
log=$tmp/doxygen.log
trap 'rm -rf "$tmp"' EXIT
# A Markdown page's Doxygen name is md_ and its path, '/' and '-' as '_'. The index's order (newest first),
# then any page the index does not list.
pagename() { local p=${1%.md}; p=${p//\//_}; echo "md_${p//-/_}"; }
{
  echo '/** @page results Results'
  echo 'Every run on a GPU host, newest first: @subpage md_docs_results_README lists them, one line each.'
  echo
  runs=$(grep -oE '\]\(2[^)]*\.md\)' docs/results/README.md | sed 's/^](//; s/)$//')
  for f in $runs $(cd docs/results && ls -r 2*.md 2>/dev/null); do echo "$f"; done | awk '!seen[$0]++' |
    while read -r f; do [ -f "docs/results/$f" ] && echo "- @subpage $(pagename "docs/results/$f")"; done
  echo '*/'
} >"$tmp/results.dox"
inputs="$inputs $tmp/results.dox common/include"
for d in labs/[0-9][0-9]_* final; do [ -d "$d/include" ] && inputs="$inputs $d/include"; done
inputs=$(for i in $inputs; do [ -e "$i" ] && printf '%s ' "$i"; done)
mkdir -p docs/html
if ! { cat docs/Doxyfile; echo "INPUT = $inputs"; echo "USE_MDFILE_AS_MAINPAGE = $PWD/README.md"; } | doxygen - >"$log" 2>&1; then
  cat "$log"
  echo "docs: Doxygen reported warnings or errors (treated as errors)" >&2
  exit 1
fi
if [ -s "$log" ]; then cat "$log"; fi
# The results pages link their raw archives and CSV files and show their charts (docs/results/<run>/...)
# relative to the page: copy them. (No IMAGE_PATH: Doxygen then leaves ![..](<run>/x.png) as written.)
# The README (the site's main page) shows a chart by its path in the repository: copy them there too.
mkdir -p docs/html/docs/results
for d in docs/results/*/; do [ -d "$d" ] && cp -r "$d" docs/html/ && cp -r "$d" docs/html/docs/results/; done
echo "docs: site built in docs/html/index.html from: $inputs"
