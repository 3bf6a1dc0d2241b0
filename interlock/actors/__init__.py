"""interlock.actors."""
