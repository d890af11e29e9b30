"""`python -m diffusion_infill.model.training.corpus --out data/corpus_v2 --cache data/sources`"""

from diffusion_infill.model.training.corpus.cli import main

if __name__ == "__main__":
    main()
