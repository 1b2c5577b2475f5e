"""The taskscale controller: observer, pure policy, actuators and reconciler.

Layering (imports only go downwards): ``types`` <- ``rules`` (the scaling
rules, pure) <- ``policy`` / ``observer`` / ``actuators`` <- ``reconciler``
<- ``kube`` / ``local`` / ``cli``.  The
worker runtime (``taskscale`` minus this package) never imports the
controller, so worker images need neither the Kubernetes client nor matplotlib.
"""
