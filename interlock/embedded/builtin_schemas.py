"""The fields of the built-in kinds, as OpenAPI v3 schemas.

A real API server knows every field of a Service: ``kubectl apply`` of ``spec.prots`` fails
with ``strict decoding error: unknown field "spec.prots"`` (kubectl's default), and a client
that does not ask for strictness gets the field dropped with a warning. To behave the same, the
embedded server needs the field names of its built-in kinds; these schemas list them (types
only where a wrong type is a common mistake) and also give ``kubectl explain`` something to
show. Deep or rarely written structures are left open (``x-kubernetes-preserve-unknown-fields``)
rather than risk dropping a field the server does not list.
"""

from __future__ import annotations

from typing import Any

JsonObject = dict[str, Any]


def _object(**properties: JsonObject) -> JsonObject:
    return {"type": "object", "properties": properties}


def _open() -> JsonObject:
    return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def _array(items: JsonObject) -> JsonObject:
    return {"type": "array", "items": items}


def _map(values: JsonObject | None = None) -> JsonObject:
    return {"type": "object", "additionalProperties": values or {"type": "string"}}


_STRING: JsonObject = {"type": "string"}
_INTEGER: JsonObject = {"type": "integer"}
_BOOLEAN: JsonObject = {"type": "boolean"}
_INT_OR_STRING: JsonObject = {"x-kubernetes-int-or-string": True}
_STRINGS = _array(_STRING)

OBJECT_META = _object(
    name=_STRING,
    generateName=_STRING,
    namespace=_STRING,
    selfLink=_STRING,
    uid=_STRING,
    resourceVersion=_STRING,
    generation=_INTEGER,
    creationTimestamp=_STRING,
    deletionTimestamp=_STRING,
    deletionGracePeriodSeconds=_INTEGER,
    labels=_map(),
    annotations=_map(),
    ownerReferences=_array(
        _object(
            apiVersion=_STRING,
            kind=_STRING,
            name=_STRING,
            uid=_STRING,
            controller=_BOOLEAN,
            blockOwnerDeletion=_BOOLEAN,
        )
    ),
    finalizers=_STRINGS,
    managedFields=_array(_open()),
)

_CONDITIONS = _array(_open())
_LOAD_BALANCER_STATUS = _object(
    ingress=_array(
        _object(
            ip=_STRING,
            hostname=_STRING,
            ipMode=_STRING,
            ports=_array(_object(port=_INTEGER, protocol=_STRING, error=_STRING)),
        )
    )
)
_OBJECT_REFERENCE = _object(
    apiVersion=_STRING,
    kind=_STRING,
    name=_STRING,
    namespace=_STRING,
    uid=_STRING,
    resourceVersion=_STRING,
    fieldPath=_STRING,
)


def _kind(**properties: JsonObject) -> JsonObject:
    return _object(apiVersion=_STRING, kind=_STRING, metadata=OBJECT_META, **properties)


SERVICE = _kind(
    spec=_object(
        allocateLoadBalancerNodePorts=_BOOLEAN,
        clusterIP=_STRING,
        clusterIPs=_STRINGS,
        externalIPs=_STRINGS,
        externalName=_STRING,
        externalTrafficPolicy=_STRING,
        healthCheckNodePort=_INTEGER,
        internalTrafficPolicy=_STRING,
        ipFamilies=_STRINGS,
        ipFamilyPolicy=_STRING,
        loadBalancerClass=_STRING,
        loadBalancerIP=_STRING,
        loadBalancerSourceRanges=_STRINGS,
        ports=_array(
            _object(
                appProtocol=_STRING,
                name=_STRING,
                nodePort=_INTEGER,
                port=_INTEGER,
                protocol=_STRING,
                targetPort=_INT_OR_STRING,
            )
        ),
        publishNotReadyAddresses=_BOOLEAN,
        selector=_map(),
        sessionAffinity=_STRING,
        sessionAffinityConfig=_open(),
        trafficDistribution=_STRING,
        type=_STRING,
    ),
    status=_object(loadBalancer=_LOAD_BALANCER_STATUS, conditions=_CONDITIONS),
)

NAMESPACE = _kind(
    spec=_object(finalizers=_STRINGS),
    status=_object(phase=_STRING, conditions=_CONDITIONS),
)

SECRET = _kind(data=_map(), stringData=_map(), type=_STRING, immutable=_BOOLEAN)

CONFIG_MAP = _kind(data=_map(), binaryData=_map(), immutable=_BOOLEAN)

EVENT = _kind(
    action=_STRING,
    count=_INTEGER,
    eventTime=_STRING,
    firstTimestamp=_STRING,
    involvedObject=_OBJECT_REFERENCE,
    lastTimestamp=_STRING,
    message=_STRING,
    reason=_STRING,
    related=_OBJECT_REFERENCE,
    reportingComponent=_STRING,
    reportingInstance=_STRING,
    series=_open(),
    source=_object(component=_STRING, host=_STRING),
    type=_STRING,
)

ENDPOINT_SLICE = _kind(
    addressType=_STRING,
    endpoints=_array(
        _object(
            addresses=_STRINGS,
            conditions=_object(ready=_BOOLEAN, serving=_BOOLEAN, terminating=_BOOLEAN),
            deprecatedTopology=_map(),
            hints=_open(),
            hostname=_STRING,
            nodeName=_STRING,
            targetRef=_OBJECT_REFERENCE,
            zone=_STRING,
        )
    ),
    ports=_array(_object(appProtocol=_STRING, name=_STRING, port=_INTEGER, protocol=_STRING)),
)

LEASE = _kind(
    spec=_object(
        acquireTime=_STRING,
        holderIdentity=_STRING,
        leaseDurationSeconds=_INTEGER,
        leaseTransitions=_INTEGER,
        preferredHolder=_STRING,
        renewTime=_STRING,
        strategy=_STRING,
    )
)

_INGRESS_BACKEND = _object(
    resource=_object(apiGroup=_STRING, kind=_STRING, name=_STRING),
    service=_object(name=_STRING, port=_object(name=_STRING, number=_INTEGER)),
)

INGRESS = _kind(
    spec=_object(
        defaultBackend=_INGRESS_BACKEND,
        ingressClassName=_STRING,
        rules=_array(
            _object(
                host=_STRING,
                http=_object(
                    paths=_array(_object(backend=_INGRESS_BACKEND, path=_STRING, pathType=_STRING))
                ),
            )
        ),
        tls=_array(_object(hosts=_STRINGS, secretName=_STRING)),
    ),
    status=_object(loadBalancer=_LOAD_BALANCER_STATUS),
)

INGRESS_CLASS = _kind(
    spec=_object(
        controller=_STRING,
        parameters=_object(
            apiGroup=_STRING, kind=_STRING, name=_STRING, namespace=_STRING, scope=_STRING
        ),
    )
)

CUSTOM_RESOURCE_DEFINITION = _kind(
    spec=_object(
        group=_STRING,
        names=_object(
            kind=_STRING,
            listKind=_STRING,
            plural=_STRING,
            singular=_STRING,
            shortNames=_STRINGS,
            categories=_STRINGS,
        ),
        scope=_STRING,
        # Each version carries an arbitrary OpenAPI schema: left open.
        versions=_array(_open()),
        conversion=_open(),
        preserveUnknownFields=_BOOLEAN,
    ),
    status=_open(),
)
