"""The built-in difficulty scorers: the product's wording `heuristic` and the `trajectory` scorer
that also reads what happened. Registered by name in `streams.core.difficulty`."""
