#!/usr/bin/env bash
# Before a three-way apply: refresh the stat cache (the boot's chown made every
# entry look modified, which --3way, implying --index, reports as "does not
# match index"), then back the index up for git_workspace_restore.sh.
# $1 = the index backup.
backup=$1
git update-index -q --refresh
git_dir=$(git rev-parse --absolute-git-dir)
rm -f "$backup"
if [ -f "$git_dir/index" ]; then cp "$git_dir/index" "$backup"; fi
