"""interlock.kube."""
