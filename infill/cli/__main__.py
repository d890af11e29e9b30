"""`python -m diffusion_infill.infill.cli`: the `infill` command."""

import sys

from diffusion_infill.infill.cli import main

sys.exit(main())
