#!/bin/sh
# setup.sh - npm dependencies of the browser test (playwright-core only; the
# browser is Debian's /usr/bin/chromium, never downloaded).  Installs from
# package-lock.json when node_modules/playwright-core is missing.
#
# Without node/npm it says so and exits 0 (test_browser.py then skips), except
# with CB_MUST_WORK=1, where it fails.
set -eu
cd "$(dirname "$0")"
[ -f node_modules/playwright-core/package.json ] && exit 0
if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
    echo "tests/frontends/setup.sh: node/npm not found (apt-get install nodejs npm); the browser test will not run"
    [ "${CB_MUST_WORK:-}" = 1 ] && exit 1
    exit 0
fi
echo "tests/frontends/setup.sh: npm ci (playwright-core)"
# PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD: playwright-core downloads nothing anyway; belt and braces
PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error \
    || PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --no-audit --no-fund --loglevel=error
