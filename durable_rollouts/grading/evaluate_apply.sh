#!/usr/bin/env bash
# One rung of the apply ladder: $1 = 3way | apply | patch, $2 = the patch file.
# A three-way apply is preceded by git_workspace_backup.sh in the same script.
rung=$1 patch_file=$2
case $rung in
  3way)
    git apply --3way --whitespace=nowarn "$patch_file"
    ;;
  apply)
    git apply --whitespace=nowarn "$patch_file"
    ;;
  patch)
    patch -p1 --fuzz=3 --batch --forward --no-backup-if-mismatch --dry-run -i "$patch_file" >/dev/null \
      && patch -p1 --fuzz=3 --batch --forward --no-backup-if-mismatch -i "$patch_file"
    ;;
  *)
    echo "unknown apply rung $rung" >&2
    exit 2
    ;;
esac
