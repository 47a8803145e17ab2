#!/usr/bin/env bash
# Puts the working tree and index back to the baseline after a conflicted three-way
# apply: a two-tree read-tree from the current state to the baseline updates,
# creates and deletes exactly the files that differ; the repository's index comes
# back from the backup taken before the apply (or is removed if there was none).
# $1 = baseline file, $2 = harness directory, $3 = index backup; the rest = exclude pathspecs.
set -e
baseline=$1 harness=$2 backup=$3
shift 3
base=$(cat "$baseline")
git_dir=$(git rev-parse --absolute-git-dir)
index=$(mktemp -u "$harness/restore-index.XXXXXX")
trap 'rm -f "$index"' EXIT
export GIT_INDEX_FILE=$index
git read-tree "$base"
git add -A -- . "$@"
git read-tree -m -u "$(git write-tree)" "$base"
if [ -f "$backup" ]; then cp "$backup" "$git_dir/index"; else rm -f "$git_dir/index"; fi
