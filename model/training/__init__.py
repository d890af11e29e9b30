"""Making a model: the corpus (corpus/), its tokenizer, the noising of training examples,
the training script, and what ends a run (checkpoints and exports, growing, packing to
int8, releasing an export into model/weights); and the fits of the tables that ship beside
it (the fills' confidence, a completion copy's, the fixer's line prior) from rows files.
Serving a model (model/ outside this package, the engine, the worker, the language server)
never imports it (tests/test_layout.py checks)."""
