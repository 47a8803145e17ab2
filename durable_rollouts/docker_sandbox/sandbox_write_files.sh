#!/usr/bin/env bash
# Writes files given as its arguments, four a file: absolute path, owner uid (also its group), mode
# (octal), content. As an archive written at / would: missing parents made (0755), each file
# replaced whole. Run as root, each file gets the owner given; run as that owner, its own group.
set -e
umask 022
while [ $# -ge 4 ]; do
  mkdir -p -- "${1%/*}"
  printf '%s' "$4" >"$1.new"
  if [ "$EUID" -eq 0 ]; then chown "$2:$2" "$1.new"; fi
  chmod "$3" "$1.new"
  mv -f -- "$1.new" "$1"
  shift 4
done
