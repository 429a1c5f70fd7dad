#!/bin/sh
# Browser tests drive Debian's Chromium with Playwright (Playwright cannot download its
# own browser on machines without internet). Install it when missing and we may.
set -e
if [ -x /usr/bin/chromium ]; then
    exit 0
fi
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "Installing Debian's chromium for the browser tests..."
    apt-get install -y -q chromium >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; }
    exit 0
fi
echo "warning: /usr/bin/chromium is missing; browser tests will fail under CI=true." >&2
echo "         Install it with: sudo apt-get install chromium" >&2
