"""`python -m model.corpus --out data/corpus_v2 --cache data/sources`"""

from model.corpus.cli import main

if __name__ == "__main__":
    main()
