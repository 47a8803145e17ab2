"""Claude Code: where the binary comes from (npm install or host tarballs) and how a rollout launches and judges it."""
