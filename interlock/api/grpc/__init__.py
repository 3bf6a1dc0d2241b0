"""Linkerd's proxy API (``io.linkerd.proxy.outbound.OutboundPolicies``) served over gRPC.

A second encoding of the policies the JSON API serves (``interlock/api/policy.py``): the same
service-port watches and latest-value slots, the proto messages of the ``linkerd2-proxy-api``
crate (generated into :mod:`interlock.api.grpc.proto` by ``hack/gen-proxy-api.sh``). Importing
this package imports no gRPC: the server (:mod:`interlock.api.grpc.server`) is loaded only when
``--grpc-addr`` asks for it, so a controller without it carries none of grpcio's memory.
"""
