"""The worker's Prometheus endpoint and the host-side rollout metrics.

One endpoint (``ROLLOUT_METRICS_ADDRESS``) serves everything: ``metrics_runtime`` builds the Temporal
``Runtime`` whose Prometheus exporter serves the SDK's own metrics (``temporal_*``, durations in
seconds), the workflows' (``workflows.rollout_metrics``, through ``workflow.metric_meter()``), the
activities' (``activity.metric_meter()``) and the adapter's and host's (``HostMetrics``, on the
runtime's meter). The client and both workers must be built on that runtime.

Invariants: labels are bounded (a stage, a status, an error type, never a session or workflow id);
with no address every meter is the SDK's no-op meter, so recording costs nothing and serves nothing.
"""

from __future__ import annotations

from temporalio import activity
from temporalio.common import MetricMeter
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

from contracts.telemetry_names import STAGE_DURATION

ADAPTER_TURN_SECONDS = "rollout_adapter_turn_seconds"
ADAPTER_TURNS = "rollout_adapter_turns_total"
ADAPTER_SAMPLED_TOKENS = "rollout_adapter_sampled_tokens_total"
POLICY_ERRORS = "rollout_policy_errors_total"
SESSIONS_IN_FLIGHT = "rollout_sessions_in_flight"
AGENT_SLOTS = "rollout_agent_slots"
AGENT_SLOTS_IN_USE = "rollout_agent_slots_in_use"
POLICY_VERSION_LAG = "rollout_policy_version_lag"
EVENT_LOOP_LAG = "rollout_event_loop_lag_seconds"
SECONDS_BUCKETS: list[float] = [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600]
VERSION_LAG_BUCKETS: list[float] = [0, 1, 2, 3, 4, 5, 8, 16, 32]
LOOP_LAG_BUCKETS: list[float] = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5]
BUCKETS: dict[str, list[float]] = {
    STAGE_DURATION: SECONDS_BUCKETS,
    ADAPTER_TURN_SECONDS: SECONDS_BUCKETS,
    POLICY_VERSION_LAG: VERSION_LAG_BUCKETS,
    EVENT_LOOP_LAG: LOOP_LAG_BUCKETS,
}


class MetricsAddressError(ValueError):
    """The Prometheus exporter could not serve on the configured address (taken, not this host's, …)."""


def metrics_runtime(address: str | None) -> Runtime:
    """A runtime serving Prometheus on ``address``; with None, the SDK's default runtime (no metrics)."""
    if address is None:
        return Runtime.default()
    config = PrometheusConfig(bind_address=address, durations_as_seconds=True, histogram_bucket_overrides=BUCKETS)
    try:
        return Runtime(telemetry=TelemetryConfig(metrics=config))
    except ValueError as error:
        raise MetricsAddressError(f"ROLLOUT_METRICS_ADDRESS: cannot serve metrics on {address}: {error}") from None


class HostMetrics:
    """What the adapter and the host's slot accounting report, on the runtime's meter."""

    def __init__(self, meter: MetricMeter = MetricMeter.noop):
        self._turn_seconds = meter.create_histogram_float(ADAPTER_TURN_SECONDS, "adapter turn latency: body parsed to reply ready", "s")
        self._turns = meter.create_counter(ADAPTER_TURNS, "adapter turns answered")
        self._sampled = meter.create_counter(ADAPTER_SAMPLED_TOKENS, "tokens the policy sampled for answered adapter turns")
        self._policy_errors = meter.create_counter(POLICY_ERRORS, "adapter turns the policy server failed, by error type")
        self._sessions = meter.create_gauge(SESSIONS_IN_FLIGHT, "adapter sessions open on this worker")
        self._slots = meter.create_gauge(AGENT_SLOTS, "agent slots of this worker (ROLLOUT_AGENT_SLOTS)")
        self._slots_in_use = meter.create_gauge(AGENT_SLOTS_IN_USE, "agent slots held by sessions or pick_host reservations")
        self._loop_lag = meter.create_histogram_float(EVENT_LOOP_LAG, "how late the worker's event loop woke a timed sleep", "s")

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


def record_version_lag(lag: int) -> None:
    """In an activity: a merged rollout's policy-version lag (server's version minus its oldest token's)."""
    activity.metric_meter().create_histogram(POLICY_VERSION_LAG, "weight versions between a merged rollout's oldest token and the server").record(lag)
