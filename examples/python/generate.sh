#!/usr/bin/env bash
# Generates the Python message classes of the contract into examples/python/gen
# (git-ignored) with protoc. Needs Debian's protobuf-compiler.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
mkdir -p "$here/gen"
protoc -I "$root/proto" -I "$here/proto" --python_out="$here/gen" \
  hf3fs/metadata/v1/metadata.proto google/rpc/status.proto
