"""``interlock demo``: the whole controller with no cluster, something to curl, and a live trace.

Kept apart from the controller so that nothing the demo needs (echo servers, its EndpointSlices,
the trace printer) leaks into production wiring: the demo only drives the same ``Controller`` that
``interlock run --embedded`` starts.
"""
