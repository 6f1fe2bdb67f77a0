"""Telemetry: OpenTelemetry traces (tracing.py, off and free unless configured) and Prometheus
metrics at /metrics (metrics.py, endpoint.py). docs/telemetry.md describes both."""
