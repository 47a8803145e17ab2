"""What the adapter and the host's slot accounting report: instrument names and ``HostMetrics``.

``HostMetrics`` records on a ``durable_rollouts.meters.Meter`` (the worker passes its runtime's, so these
series come out of the one Prometheus endpoint); with none it records nothing.

Invariant: labels are bounded (an error type, never a session or workflow id).
"""

from __future__ import annotations

from durable_rollouts.meters import Meter, NoMeter

ADAPTER_TURN_SECONDS = "rollout_adapter_turn_seconds"
ADAPTER_TURNS = "rollout_adapter_turns_total"
ADAPTER_SAMPLED_TOKENS = "rollout_adapter_sampled_tokens_total"
POLICY_ERRORS = "rollout_policy_errors_total"
SESSIONS_IN_FLIGHT = "rollout_sessions_in_flight"
AGENT_SLOTS = "rollout_agent_slots"
AGENT_SLOTS_IN_USE = "rollout_agent_slots_in_use"
EVENT_LOOP_LAG = "rollout_event_loop_lag_seconds"


class HostMetrics:
    """What the adapter and the host's slot accounting report, on ``meter``."""

    def __init__(self, meter: Meter | None = None):
        meter = meter or NoMeter()
        self._turn_seconds = meter.create_histogram_float(
            ADAPTER_TURN_SECONDS, "adapter turn latency: body parsed to reply ready", "s"
        )
        self._turns = meter.create_counter(ADAPTER_TURNS, "adapter turns answered")
        self._sampled = meter.create_counter(
            ADAPTER_SAMPLED_TOKENS, "tokens the policy sampled for answered adapter turns"
        )
        self._policy_errors = meter.create_counter(
            POLICY_ERRORS, "adapter turns the policy server failed, by error type"
        )
        self._sessions = meter.create_gauge(SESSIONS_IN_FLIGHT, "adapter sessions open on this worker")
        self._slots = meter.create_gauge(AGENT_SLOTS, "agent slots of this worker (ROLLOUT_AGENT_SLOTS)")
        self._slots_in_use = meter.create_gauge(
            AGENT_SLOTS_IN_USE, "agent slots held by sessions or pick_host reservations"
        )
        self._loop_lag = meter.create_histogram_float(
            EVENT_LOOP_LAG, "how late the worker's event loop woke a timed sleep", "s"
        )

    def turn(self, seconds: float, sampled_tokens: int) -> None:
        self._turn_seconds.record(seconds)
        self._turns.add(1)
        self._sampled.add(sampled_tokens)

    def policy_error(self, error: BaseException) -> None:
        self._policy_errors.add(1, {"error": type(error).__name__})

    def loop_lag(self, seconds: float) -> None:
        self._loop_lag.record(seconds)

    def occupancy(self, sessions: int, slots: int, slots_in_use: int) -> None:
        self._sessions.set(sessions)
        self._slots.set(slots)
        self._slots_in_use.set(slots_in_use)
