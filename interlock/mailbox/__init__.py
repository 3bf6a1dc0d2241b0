"""interlock.mailbox."""
