"""``python -m rmsnorm_dash …`` is ``rmsnorm-dash …`` (for hosts where the package is not installed)."""

from rmsnorm_dash.cli import main

raise SystemExit(main())
