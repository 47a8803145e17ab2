"""The worker's Prometheus endpoint and the host-side rollout metrics.

One endpoint (``ROLLOUT_METRICS_ADDRESS``) serves everything: ``metrics_runtime`` builds the Temporal
``Runtime`` whose Prometheus exporter serves the SDK's own metrics (``temporal_*``, durations in
seconds), the workflows' (``workflows.rollout_metrics``, through ``workflow.metric_meter()``), the
activities' (``activity.metric_meter()``) and the adapter's and host's
(``durable_rollouts.policy.host_metrics``, on the runtime's meter). The client and both workers must be built on that
runtime.

Invariants: labels are bounded (a stage, a status, an error type, never a session or workflow id);
with no address every meter is the SDK's no-op meter, so recording costs nothing and serves nothing.
"""

from __future__ import annotations

from temporalio import activity
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

from durable_rollouts.contracts.telemetry_names import STAGE_DURATION
from durable_rollouts.policy.host_metrics import ADAPTER_TURN_SECONDS, EVENT_LOOP_LAG

POLICY_VERSION_LAG = "rollout_policy_version_lag"
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


def record_version_lag(lag: int) -> None:
    """In an activity: a merged rollout's policy-version lag (server's version minus its oldest token's)."""
    activity.metric_meter().create_histogram(
        POLICY_VERSION_LAG, "weight versions between a merged rollout's oldest token and the server"
    ).record(lag)
