#!/usr/bin/env bash
# The JavaScript that `pathscope report --html` inlines into its page: plotly.js, taken from the
# plotly wheel on PyPI (its offline bundle, package_data/plotly.min.js), pinned by version and
# checked twice -- pip checks the wheel's sha256 (--require-hashes), this script the bundle's --
# and stored as .deps/html/plotly.min.js.  docs/user-guide.md ("The HTML report") says why
# plotly.  Called by scripts/setup.sh; with the bundle already there it does nothing.
# The digests below are python/pathscope/report/html.py's too (it checks the bundle it inlines).
set -euo pipefail
cd "$(dirname "$0")/.."

PLOTLY_VERSION=7.1.0           # the Python package; it carries plotly.js 4.1.1
PLOTLY_WHEEL_SHA256=dbb7fa18afce40d0a8e80d1bf162eceb3faa0ce5a77fe741ad09a74cf78f53f3
PLOTLY_JS_SHA256=3b6e15d45dbb7fca5bd2094291e961ddc5472cd887009e6009a56dab668d721f
DEST=.deps/html

[ -f "$DEST/plotly.min.js" ] && exit 0
echo "pathscope: fetching plotly $PLOTLY_VERSION (plotly.js for report --html)" >&2
mkdir -p "$DEST"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "plotly==$PLOTLY_VERSION --hash=sha256:$PLOTLY_WHEEL_SHA256" > "$work/requirements.txt"
.venv/bin/pip download -q --disable-pip-version-check --no-deps --only-binary :all: \
  --require-hashes -r "$work/requirements.txt" -d "$work"
.venv/bin/python - "$work"/plotly-"$PLOTLY_VERSION"-*.whl "$DEST" "$PLOTLY_JS_SHA256" <<'PY'
import hashlib, os, sys, zipfile
wheel, dest, digest = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    data = z.read("plotly/package_data/plotly.min.js")
if hashlib.sha256(data).hexdigest() != digest:
    sys.exit(f"pathscope: plotly.min.js in {os.path.basename(wheel)} does not have the "
             f"pinned sha256 {digest}")
partial = os.path.join(dest, "plotly.min.js.part")
with open(partial, "wb") as f:
    f.write(data)
os.replace(partial, os.path.join(dest, "plotly.min.js"))
PY
