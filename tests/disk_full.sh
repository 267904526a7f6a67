#!/usr/bin/env bash
# Disk full (issue 13): train with TFW_HOME on a small tmpfs until a checkpoint no longer
# fits. The run must fail cleanly: exit 1 (no signal, no "terminate called"), a message that
# names the file and says what to do, no *.tmp left behind, the store consistent and the run
# recorded as failed; after freeing space, resume works.
#
#   bash tests/disk_full.sh TFW_BINARY
# Needs to mount a tmpfs (root, or a container that allows it); prints "skipped" otherwise.
set -euo pipefail
tfw=${1:?usage: disk_full.sh TFW_BINARY}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mnt=$(mktemp -d /tmp/tfw-disk-full.XXXXXX)
if ! mount -t tmpfs -o size=3m tmpfs "$mnt" 2> /dev/null; then
  echo "disk full: skipped (cannot mount a tmpfs here)"
  rmdir "$mnt"
  exit 0
fi
data=$(mktemp -d /tmp/tfw-disk-full-data.XXXXXX)
trap 'umount "$mnt"; rmdir "$mnt"; rm -rf "$data"' EXIT
home="$mnt/home"
# The prepared tokens live on the real disk (a folder of train.bin/val.bin is used in
# place); the home on the tmpfs holds the store and checkpoints of ~1.8 MB (weights and
# AdamW state): the first fits in 3 MiB, the second does not.
"$tfw" data prepare kjv --home "$data" > /dev/null
set +e
"$tfw" --threads 1 train "$root/experiments/mini/tiny-train-tokenformer.toml" --home "$home" --name full \
  --set data.corpus="\"$data/data/kjv-byte\"" --set train.max_steps=40 \
  --set train.checkpoint_every=2 --set train.keep_checkpoints=20 > "$mnt/../tfw-disk-full.log" 2>&1
code=$?
set -e
log=$(cat "$mnt/../tfw-disk-full.log")
rm -f "$mnt/../tfw-disk-full.log"
tmp_left=$(find "$home" -name '*.tmp' | wc -l)
integrity=$(sqlite3 "$home/runs.db" 'PRAGMA integrity_check' 2>&1 || true)
status=$(sqlite3 "$home/runs.db" "SELECT status FROM runs WHERE name = 'full'" 2>&1 || true)
echo "disk full: exit $code, status $status, integrity $integrity, temp files left $tmp_left"
echo "$log" | grep -E "No space|disk|tfw:" | head -3
ok=1
[ "$code" = 1 ] || ok=0
echo "$log" | grep -q "terminate called" && ok=0
echo "$log" | grep -q "No space left on device" || ok=0
[ "$tmp_left" = 0 ] || ok=0
[ "$integrity" = ok ] || ok=0
[ "$status" = failed ] || ok=0
# Free space (the disk grows), then resume to the end.
mount -o remount,size=32m "$mnt"
if "$tfw" --threads 1 train --resume full --home "$home" --set train.keep_checkpoints=1 > /dev/null 2>&1; then
  echo "disk full: resumed after freeing space: $(sqlite3 "$home/runs.db" "SELECT status FROM runs WHERE name = 'full'")"
else
  echo "disk full: resume after freeing space failed"
  ok=0
fi
[ "$ok" = 1 ]
