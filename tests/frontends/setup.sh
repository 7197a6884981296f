#!/bin/sh
# setup.sh - npm dependencies of the browser test (playwright-core only; the
# browser is Debian's /usr/bin/chromium, never downloaded).  Installs from
# package-lock.json when node_modules/playwright-core is missing or is not the
# locked version.
#
# The locked playwright-core is the newest that still runs on Node 18: Debian
# 12's nodejs, which scripts/deps.sh installs on a machine without node.  It
# drives Debian 12's chromium through the steps of test_browser.py (checked
# with chromium 156).  Newer playwright-core (1.62 on) exits at start-up on
# Node < 20 ("Playwright requires Node.js 20 or higher").
#
# Without node/npm, or with a node older than the lock needs, it says so and
# exits 0 (test_browser.py then skips), except with CB_MUST_WORK=1, where it
# fails.
set -eu
cd "$(dirname "$0")"
NODE_MIN=18     # engines.node of the locked playwright-core

unusable() {
    echo "tests/frontends/setup.sh: $*; the browser test will not run"
    [ "${CB_MUST_WORK:-}" = 1 ] && exit 1
    exit 0
}

if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
    unusable "node/npm not found (apt-get install nodejs npm)"
fi
major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
[ "$major" -ge "$NODE_MIN" ] 2>/dev/null \
    || unusable "node $(node --version 2>/dev/null) is older than $NODE_MIN, which playwright-core needs"

# the locked version, and the one in node_modules (if any)
want=$(node -p 'require("./package-lock.json").packages["node_modules/playwright-core"].version')
have=$(node -p 'try { require("./node_modules/playwright-core/package.json").version } catch (e) { "" }')
[ "$have" = "$want" ] && exit 0

echo "tests/frontends/setup.sh: npm ci (playwright-core $want${have:+, replacing $have})"
# PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD: playwright-core downloads nothing anyway; belt and braces
PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error
