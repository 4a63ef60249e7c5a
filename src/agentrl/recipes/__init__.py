"""Layer 8: recipes and experiments that ship with the package: the fetch learning recipe
(`learning`, its tokenizer `tokenizer`), ALFWorld from scratch (`alfworld_scratch`) and the demo
(`demo`). Each is an experiment on a named environment."""
