#!/usr/bin/env bash
# pymesos 0.3.15, unmodified, for tests/test_pymesos.py. It needs http-parser, whose C
# extension does not build on Python 3.11: its pure-Python parser works, so it is built
# without the extension (its setup.py's `run_setup(not IS_PYPY)` made `run_setup(False)`).
set -euo pipefail
python -c 'import pymesos, http_parser' 2>/dev/null && exit 0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pip download -q --no-deps --no-binary :all: -d "$work" http-parser==0.9.0
tar -xzf "$work"/http-parser-0.9.0.tar.gz -C "$work"
sed -i 's/run_setup(not IS_PYPY)/run_setup(False)/' "$work"/http-parser-0.9.0/setup.py
pip install -q "$work"/http-parser-0.9.0
pip install -q pymesos==0.3.15
