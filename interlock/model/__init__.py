"""interlock.model."""
