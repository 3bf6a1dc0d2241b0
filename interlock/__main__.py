"""Allow ``python -m interlock``."""

from interlock.cli import main

raise SystemExit(main())
