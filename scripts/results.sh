#!/usr/bin/env bash
# Regenerates the staged-report section of docs/RESULTS.md (between its staged-report markers)
# and its plots (docs/results/staged_*.svg) from a `shrike optimize` run: the demo's by default.
#
#   scripts/results.sh [OPT_DIR] [WALL_TIME_NOTE]
#
# Without OPT_DIR it runs scripts/demo.sh first (its models are cached in runs/demo, so a rerun
# only measures again) and uses runs/demo/opt. The other sections of docs/RESULTS.md name the
# script that produces each table; rerun those by hand.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
opt="${1:-}"
note="${2:-}"
if [ -z "$opt" ]; then
  t0=$SECONDS
  scripts/demo.sh
  opt=runs/demo/opt
  note="scripts/demo.sh wall time $((SECONDS - t0)) s (setup, build, data, models, measurements)"
  # The demo leaves the final model served on 8080; results.sh only wanted the report.
  [ -f runs/demo/serve.pid ] && kill "$(cat runs/demo/serve.pid)" 2>/dev/null || true
fi
[ -f "$opt/report.md" ] || { echo "results.sh: $opt/report.md missing" >&2; exit 2; }
mkdir -p docs/results
for f in "$opt"/*.svg; do cp "$f" "docs/results/staged_$(basename "$f")"; done
commit="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src scripts || echo ' (with uncommitted changes)')"
python3 - "$opt/report.md" "$commit" "$note" <<'PY'
import re, sys
report, commit, note = sys.argv[1], sys.argv[2], sys.argv[3]
md = open(report, encoding="utf-8").read()
md = md.split("\n", 1)[1]                      # drop the report's own title
md = re.sub(r"^## ", "#### ", md, flags=re.M)  # its sections nest under this one
md = re.sub(r"\]\((\w+)\.svg\)", r"](results/staged_\1.svg)", md)
head = f"- commit: {commit}\n" + (f"- {note}\n" if note else "")
section = "<!-- staged-report:begin (scripts/results.sh writes this part) -->\n" + head + md.strip() + "\n<!-- staged-report:end -->"
path = "docs/RESULTS.md"
text = open(path, encoding="utf-8").read()
text = re.sub(r"<!-- staged-report:begin.*?<!-- staged-report:end -->", lambda m: section, text, flags=re.S)
open(path, "w", encoding="utf-8").write(text)
PY
echo "results.sh: updated docs/RESULTS.md and docs/results/staged_*.svg from $opt"
