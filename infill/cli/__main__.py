"""`python -m infill.cli`: the `infill` command."""

import sys

from infill.cli import main

sys.exit(main())
