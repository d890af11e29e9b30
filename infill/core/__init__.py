"""The engine: pure Python and numpy over token ids and text.

No I/O and no torch: the network is reached only through the Denoiser interface
(model/denoiser.py), which the caller hands in. docs/ARCHITECTURE.md has the data flow.
"""
