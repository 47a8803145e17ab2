#!/usr/bin/env bash
# Guarantees: when this exits 0, `docker info` succeeds, i.e. a Docker engine
# is running. If none is, installs Debian's docker.io when dockerd is missing,
# starts dockerd as root in the background (overlay2, default bridge; log in
# /var/log/dockerd-rollouts.log) and waits up to 60 s for it. Idempotent.
set -euo pipefail
export PATH="$PATH:/usr/sbin:/sbin"
LOG=/var/log/dockerd-rollouts.log

if docker info >/dev/null 2>&1; then echo "docker: engine running"; exit 0; fi

if ! command -v dockerd >/dev/null; then
  echo "docker: installing docker.io (apt)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq docker.io >/dev/null
fi

# A dockerd may already be starting (apt's init script, a parallel run): just wait.
if pgrep -x dockerd >/dev/null; then
  echo "docker: dockerd already starting, waiting"
else
  # A pid file left by an engine that did not stop cleanly may name a process that is not containerd
  # any more: dockerd then waits for a containerd that never answers.
  pidfile=/var/run/docker/containerd/containerd.pid
  if [[ -f $pidfile ]] && [[ $(cat "/proc/$(cat "$pidfile")/comm" 2>/dev/null) != containerd ]]; then
    echo "docker: removing a stale containerd pid file"
    rm -f "$pidfile"
  fi
  echo "docker: starting dockerd (log: $LOG)"
  # setsid + nohup: the engine outlives this script and the shell that ran it.
  setsid nohup dockerd >>"$LOG" 2>&1 </dev/null &
fi
for _ in $(seq 60); do
  if docker info >/dev/null 2>&1; then echo "docker: engine up"; exit 0; fi
  sleep 1
done
echo "docker: dockerd did not answer within 60 s; last log lines:" >&2
tail -n 20 "$LOG" >&2
exit 1
