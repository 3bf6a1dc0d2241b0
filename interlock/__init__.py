"""interlock: a Kubernetes controller on asyncio actors."""

__version__ = "0.1.0"

from interlock.system_cas import install as _postpone_aiohttp_cas

_postpone_aiohttp_cas()
