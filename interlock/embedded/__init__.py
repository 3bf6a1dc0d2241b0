"""interlock.embedded."""
