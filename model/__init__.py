"""The model side: network, tokenizer, training, loading (the only package that imports
torch). Importing it first settles how torch's OpenMP threads wait (model/openmp.py),
which only counts before torch is loaded."""

from model.openmp import settle_spin

settle_spin()
