from durable_rollouts.contracts.host_identity import HostIdentity, parse_worker_identity, worker_identity


def test_a_worker_identity_names_its_host_queue_and_slots():
    identity = worker_identity(4242, "gpu-node-7", "rl-rollouts-host-gpu-node-7", 16)
    assert identity == "4242@gpu-node-7 host=rl-rollouts-host-gpu-node-7 slots=16"
    assert parse_worker_identity(identity) == HostIdentity("rl-rollouts-host-gpu-node-7", 16)


def test_other_pollers_are_not_hosts():
    assert parse_worker_identity("4242@gpu-node-7") is None
    assert parse_worker_identity("temporal-cli host=x slots=many") is None
