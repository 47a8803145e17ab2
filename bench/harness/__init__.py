"""What the benchmarks share, so that no bench imports another bench's code.

One job a module: ``child_roles`` (a bench's child processes: how they start, say READY and stop), ``stats`` (the
order statistics the benches print), ``procfs`` (the host's /proc: CPU, memory, command lines), ``proc_watch``
(sandbox processes seen from the host), ``docker_events`` (the managed containers' events), ``rollout_stack``
(bringing the real stack up and down for a full-stack bench), ``synthetic_results`` (a rollout result built from
random tokens), ``seaweed_s3`` (an S3 object store on loopback) and ``repo_image`` (a task image holding a large
repository).

``child_roles``, ``stats`` and ``procfs`` import only the standard library (``child_roles`` also the project's
paths): a measured child process (the adapter of ``adapter_bench`` and ``fairness_bench``) imports them, and
nothing they imported may add to what it measures.
"""
