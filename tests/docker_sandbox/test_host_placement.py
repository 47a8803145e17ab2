"""A host's agent slots and its refusals, on an injected clock: no Temporal, no Docker."""

from durable_rollouts.docker_sandbox.host_placement import (
    IMAGE_AFFINITY_ATTEMPTS,
    PREFETCH_PULLS_PER_HOST,
    AgentSlots,
    pick_refusal,
    prefetch_refusal,
)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_reservations_and_live_sessions_share_the_slots_and_a_holder_keeps_its_place():
    clock = Clock()
    slots = AgentSlots(2, ttl_s=10, clock=clock)
    assert slots.has_room("a", live_sessions=1)
    slots.reserve("a")
    assert not slots.has_room("b", live_sessions=1), "one live session and one reservation fill two slots"
    assert slots.has_room("a", live_sessions=1), "a retried pick_host of the holder keeps its place"
    assert (slots.reserved, slots.in_use(live_sessions=1)) == (1, 2)
    slots.release("a")
    assert slots.has_room("b", live_sessions=1) and slots.reserved == 0


def test_a_reservation_expires_after_its_ttl_and_renewing_it_restarts_the_clock():
    clock = Clock()
    slots = AgentSlots(1, ttl_s=10, clock=clock)
    slots.reserve("a")
    clock.now = 9.0
    assert not slots.has_room("b", live_sessions=0)
    slots.reserve("a")
    clock.now = 18.0
    assert not slots.has_room("b", live_sessions=0), "renewed at 9 s: held until 19 s"
    clock.now = 19.5
    assert slots.has_room("b", live_sessions=0) and slots.reserved == 0


def test_pick_refuses_when_full_first_then_for_the_image_a_few_times():
    assert pick_refusal(False, "img", True, True, 0) == "full", "a full host refuses whatever it holds"
    assert pick_refusal(True, "img", False, True, 0) == "image_elsewhere"
    assert pick_refusal(True, "img", False, True, IMAGE_AFFINITY_ATTEMPTS) is None, "then any host with a slot takes it"
    assert pick_refusal(True, "img", False, False, 0) is None, "without image affinity slots alone decide"
    assert pick_refusal(True, "", False, True, 0) is None, "a request without an image is placed by slots alone"


def test_prefetch_is_taken_by_a_holder_left_to_others_then_limited_by_pulls_ahead():
    assert prefetch_refusal(True, True, 0, PREFETCH_PULLS_PER_HOST) is None, "a holder takes it at once"
    assert prefetch_refusal(False, True, 0, 0) == "image_elsewhere"
    assert prefetch_refusal(False, True, IMAGE_AFFINITY_ATTEMPTS, PREFETCH_PULLS_PER_HOST) == "pulls_busy"
    assert prefetch_refusal(False, True, IMAGE_AFFINITY_ATTEMPTS, PREFETCH_PULLS_PER_HOST - 1) is None
    assert prefetch_refusal(False, False, 0, 0) is None
