#!/usr/bin/env bash
# Snapshots (record) or restores (reset) the paths a grader protects.
# $1 = record | reset, $2 = the index file, $3 = the snapshot file, $4 = the baseline file,
# $5 = the marker printed before reset's listing; the rest = the protected pathspecs.
#
# stage: put the protected paths as they are in the working tree into
# $GIT_INDEX_FILE: first drop the entries that are gone (diff-files also counts
# a path behind a symlink or under a file as gone), then add what is there:
# ls-files -o without --exclude-standard lists ignored files too; --replace lets
# a file take a directory's place and back.
#
# reset: the two-tree read-tree updates, creates and deletes exactly the files
# whose entries differ between the current state and the snapshot; then the
# repository's own index takes those paths from the restored tree (`git apply
# --3way` staged the agent's versions, which a `git checkout .` would bring
# back). The changed paths come last, NUL-separated after the marker (a login
# shell may print before it).
set -eo pipefail
mode=$1 snapshot_file=$3 baseline=$4 marker=$5
export GIT_INDEX_FILE=$2
shift 5
stage() {
  git diff-files -z --name-only --diff-filter=D -- "$@" | git update-index -z --force-remove --stdin
  git ls-files -z --cached --others -- "$@" | git update-index -z --add --remove --replace --stdin
}
case $mode in
  record)
    rm -f "$GIT_INDEX_FILE"
    git read-tree "$(cat "$baseline")"
    stage "$@"
    git write-tree >"$snapshot_file"
    ;;
  reset)
    snapshot=$(cat "$snapshot_file")
    stage "$@"
    current=$(git write-tree)
    git diff-tree -r -z --name-only --no-renames "$snapshot" "$current" >"$snapshot_file.changed"
    git read-tree -m -u "$current" "$snapshot"
    unset GIT_INDEX_FILE
    if [ -f "$(git rev-parse --git-path index)" ]; then git update-index -z --add --remove --replace --stdin <"$snapshot_file.changed"; fi
    printf '%s\0' "$marker"
    cat "$snapshot_file.changed"
    ;;
  *)
    echo "unknown mode $mode" >&2
    exit 2
    ;;
esac
