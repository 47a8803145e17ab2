#!/usr/bin/env bash
# Records the tree of the working state (tracked + untracked, minus the excludes) as the
# workspace baseline, without touching the repository's own index.
# $1 = baseline file, $2 = harness directory; the rest = exclude pathspecs.
set -e
baseline=$1 harness=$2
shift 2
index=$harness/snapshot-index.$$
trap 'rm -f "$index"' EXIT
git_dir=$(git rev-parse --absolute-git-dir)
if [ -f "$git_dir/index" ]; then cp "$git_dir/index" "$index"; fi
GIT_INDEX_FILE=$index git add -A -- . "$@"
GIT_INDEX_FILE=$index git write-tree >"$baseline.tmp"
mv -f "$baseline.tmp" "$baseline"
