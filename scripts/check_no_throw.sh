#!/usr/bin/env bash
# Fails when project code throws or aborts: input problems must become an
# absl::Status (see README, "Errors"). Tests are exempt.
set -euo pipefail
cd "$(dirname "$0")/.."
hits=$(git grep -n -E '(^|[^_[:alnum:]])throw([[:space:]]|;|\()|(^|[^_[:alnum:]])abort\(\)' \
  -- '*.cc' '*.h' '*.cu' ':!tests/' || true)
if [ -n "$hits" ]; then
  echo "error: project code must not throw or abort:" >&2
  echo "$hits" >&2
  exit 1
fi
echo "no-throw check: ok"
