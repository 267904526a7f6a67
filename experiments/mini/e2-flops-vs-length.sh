#!/usr/bin/env bash
# E2 mini (paper Fig. 5, Table 3): FLOPs against sequence length for a Tokenformer that grows
# its parameter tokens at fixed d (256 tokens -> 1024 per attention projection) and a
# Transformer that grows its width d (256 -> 512) at matched parameters: the formula terms,
# and the forward time per token measured on this machine at each length.
#   bash experiments/mini/e2-flops-vs-length.sh [--json]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mini="$root/experiments/mini"
exec "$root/build/tfw" flops "$mini"/e2-tokenformer-{small,grown}.toml "$mini"/e2-transformer-{small,grown}.toml \
  --lengths 256,1024,4096 --measure "$@"
