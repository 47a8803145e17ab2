#!/usr/bin/env bash
# Records the tree of the working state (tracked + untracked, minus the excludes) as the
# workspace baseline, without touching the repository's own index. A workdir in no git
# repository (a Harbor environment, say) first becomes one: `git init` and one commit of
# everything in it (minus the excludes), so the agent's `git status` / `git diff` and the
# grader's apply ladder see the image's files as the baseline.
# $1 = baseline file, $2 = harness directory; the rest = exclude pathspecs.
set -e
baseline=$1 harness=$2
shift 2
if ! git rev-parse --git-dir >/dev/null 2>&1; then
  git init -q
  git add -A -- . "$@"
  GIT_AUTHOR_DATE=2026-01-01T00:00:00Z GIT_COMMITTER_DATE=2026-01-01T00:00:00Z \
    git -c user.name=rollout -c user.email=rollout@localhost commit -q --no-verify --allow-empty -m baseline
fi
index=$harness/snapshot-index.$$
trap 'rm -f "$index"' EXIT
git_dir=$(git rev-parse --absolute-git-dir)
if [ -f "$git_dir/index" ]; then cp "$git_dir/index" "$index"; fi
GIT_INDEX_FILE=$index git add -A -- . "$@"
GIT_INDEX_FILE=$index git write-tree >"$baseline.tmp"
mv -f "$baseline.tmp" "$baseline"
