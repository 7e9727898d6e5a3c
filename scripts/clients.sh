#!/usr/bin/env bash
# The real clients the integration tests drive, installed when missing
# (idempotent and quiet; called by scripts/test.sh and .ci/run):
#   curl and kcat from Debian's packages (as root, or with sudo -n);
#   confluent-kafka[avro,schemaregistry] and kafka-python from PyPI into the
#   virtualenv target/py-clients (tests find its python through
#   ES_CLIENTS_PYTHON, which scripts/test.sh exports).
# A client that cannot be installed is named on stderr; the tests that need
# it then fail saying so.
set -uo pipefail
cd "$(dirname "$0")/.."

apt_get() { if [ "$(id -u)" = 0 ]; then apt-get "$@"; else sudo -n apt-get "$@"; fi; }
missing=()
command -v curl >/dev/null 2>&1 || missing+=(curl)
command -v kcat >/dev/null 2>&1 || missing+=(kcat)
if [ ${#missing[@]} -gt 0 ]; then
    { apt_get update -qq && DEBIAN_FRONTEND=noninteractive apt_get install -y -qq "${missing[@]}"; } >/dev/null 2>&1 \
        || echo "warning: could not install ${missing[*]}; the tests that drive them will fail" >&2
fi

VENV=target/py-clients
PY_PACKAGES=("confluent-kafka[avro,schemaregistry]" "kafka-python")
stamp="$VENV/.installed"
want="${PY_PACKAGES[*]}"
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    mkdir -p target
    if python3 -m venv "$VENV" >/dev/null 2>&1 \
        && "$VENV/bin/python" -m pip install -q --disable-pip-version-check "${PY_PACKAGES[@]}" >/dev/null 2>&1; then
        echo "$want" > "$stamp"
    else
        echo "warning: could not install ${PY_PACKAGES[*]} into $VENV; the Python client tests will fail" >&2
    fi
fi
