"""``python -m robopin.cli``."""

import sys

from robopin.cli import main

sys.exit(main())
