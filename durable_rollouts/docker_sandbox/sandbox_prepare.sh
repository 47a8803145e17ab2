#!/usr/bin/env bash
# Prepares a booted sandbox's workspace as root; idempotent.
# $1 = workdir, $2 = harness directory, $3 = agent user, $4 = its uid, $5 = its home,
# $6 = the SWE-bench testbed bin directory, $7 = 1 to give the workdir to the agent user (an agent sandbox),
# 0 to leave its ownership as the image has it (a grading sandbox, where everything runs as root);
# then, optionally, a command (its argv) this exec becomes once the workspace is prepared, in the workdir
# (a grading sandbox's set-up steps and baseline, which run as root too: one exec for both).
# Every failure here exits 85, so a caller can tell it from the command's own.
# Login shells (bash -l) reset PATH in /etc/profile; the first profile.d entry
# restores the image's own PATH (e.g. a conda or venv bin). SWE-bench images
# keep the repo's environment in the conda env "testbed", activated only in
# root's .bashrc: the second entry puts it first on the agent's PATH too, so
# the agent runs the tests the grader will run.
set -e
trap 'exit 85' ERR
workdir=$1 harness=$2 user=$3 uid=$4 home=$5 testbed=$6 own=$7
shift 7
[ -d "$workdir" ] || { echo "workdir $workdir does not exist in the image" >&2; exit 85; }
mkdir -p /etc/profile.d
printf 'PATH=%q\nexport PATH\n' "$PATH" >/etc/profile.d/00-rollout-image-path.sh
echo "if [ -d $testbed ]; then PATH=$testbed:\$PATH; fi" >/etc/profile.d/01-rollout-swebench-testbed.sh
if ! id -u "$user" >/dev/null 2>&1; then
  if command -v useradd >/dev/null; then
    useradd -o -m -u "$uid" -d "$home" -s /bin/bash "$user"
  else
    adduser -D -u "$uid" -h "$home" -s /bin/sh "$user"
  fi
fi
mkdir -p "$home" "$harness"
chmod 1777 "$harness"
chown -R "$user": "$home"
if [ "$own" = 1 ]; then chown -R "$user": "$workdir"; fi
git config --system --add safe.directory '*'
if [ $# -gt 0 ]; then
  cd "$workdir"
  trap - ERR
  exec "$@"
fi
