"""`python -m diffusion_infill.infill.cli`: the `infill` command."""

from diffusion_infill.infill.cli import run

run()
