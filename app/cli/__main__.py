"""`python -m app.cli …` is `ampquiz …`."""

import sys

from app.cli import main

sys.exit(main())
