"""The composition root: the one place that builds a running controller from its parts.

Everything else in the package is a part that knows nothing of how it is wired: actors
(``actors/``), the Kubernetes client (``kube/``), the HTTP APIs (``api/``), the edge data plane
(``edge/``), the pure model (``model/``). This package connects them, and nothing outside it
reads a :class:`~interlock.config.ControllerConfig` to open connections or spawn actors:

* :mod:`.app` — :class:`~interlock.controller.app.Controller`: informers → actors → policy API,
  status through the Lease; what ``interlock run`` and every end-to-end test start;
* :mod:`.edge_half` — :class:`~interlock.controller.edge_half.EdgeHalf`, the controller's edge
  half (the Ingress/ModuleSet directories and edge actors, and the data plane they program);
* :mod:`.mesh_half` — :class:`~interlock.controller.mesh_half.MeshHalf`, the mesh half
  (``--mesh-addr``): the mesh listener and, without an edge, the EndpointSlice informer;
* :mod:`.upstreams` — :class:`~interlock.controller.upstreams.UpstreamIndex`, how the
  in-process edge and the mesh listener resolve a Service port from policies and endpoints
  (an instance each, over the controller's one upstream cache);
* :mod:`.status_sink` — :class:`~interlock.controller.status_sink.KubeStatusSink`, the status
  writer's one sink (``/status`` merge patches and Events).

Nothing is re-exported here, so importing one module does not import the others.
"""
