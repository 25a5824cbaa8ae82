#!/usr/bin/env bash
# make linkcheck: every internal link of the Doxygen site (docs/html, from make docs) must resolve.
# Uses LinkChecker (Debian package linkchecker). Links to other sites (http, https, mailto) are not
# followed; any other target, including a file: URL Doxygen made of text, must exist.
set -uo pipefail
cd "$(dirname "$0")/.."
site=${1:-docs/html}
[ -f "$site/index.html" ] || { echo "linkcheck: no $site/index.html: run make docs first" >&2; exit 2; }
command -v linkchecker >/dev/null || { echo "linkcheck: linkchecker is not installed: make deps" >&2; exit 2; }
# As root, LinkChecker drops to user nobody: give it a world-readable copy of the site.
dir=$site
if [ "$(id -u)" -eq 0 ]; then
  dir=$(mktemp -d)
  trap 'rm -rf "$dir"' EXIT
  cp -r "$site/." "$dir/" && chmod -R a+rX "$dir"
fi
log=$(mktemp)
linkchecker --no-status --no-warnings --check-extern --ignore-url='^https?:' --ignore-url='^mailto:' \
  --ignore-url='^ftp:' "$dir/index.html" >"$log" 2>&1
rc=$?
grep -v 'Running as root user' "$log" | sed "s|file://$dir/|$site/|g; s|$dir/|$site/|g" | grep -E '^(URL|Parent URL|Result)|found\.' >&2
rm -f "$log"
if [ "$rc" -ne 0 ]; then echo "linkcheck: broken links in $site (above)" >&2; exit 1; fi
echo "linkcheck: every internal link of $site resolves"
