"""The model side (the only package that imports torch): the Denoiser contract, finding and
loading a model, the networks; training lives in model/training/. Importing it first
settles how torch's OpenMP threads wait (model/openmp.py), which only counts before torch
is loaded."""

from diffusion_infill.model.openmp import settle_spin

settle_spin()
