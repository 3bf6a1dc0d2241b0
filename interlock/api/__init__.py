"""interlock.api."""
