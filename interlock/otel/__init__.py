"""interlock.otel: OpenTelemetry spans of the actor messages, exported over OTLP/HTTP.

Optional (``pip install 'interlock[otel]'``): imported only when ``--otlp-endpoint`` is given,
so a controller without it neither loads the SDK nor pays for it per message.
"""

from interlock.otel.spans import SpanTracer, span_tracer, traces_url

__all__ = ["SpanTracer", "span_tracer", "traces_url"]
