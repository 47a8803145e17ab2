#!/bin/sh
# Runs the unpacked Claude Code CLI with the unpacked Node, wherever this directory is mounted.
root=$(dirname "$(dirname "$(readlink -f "$0")")")
exec "$root/node/bin/node" "$root/cli/cli.js" "$@"
