"""interlock.edge."""
