"""Sentence embeddings: MiniLM in numpy, the distilled static model, model loading."""
