"""``python -m robopin.cameras list`` — the same as ``robopin cameras list``."""

from robopin.cameras.cli import main

raise SystemExit(main())
