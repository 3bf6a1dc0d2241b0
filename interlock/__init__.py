"""interlock: a Kubernetes controller on asyncio actors."""

__version__ = "0.1.0"
