"""E-traces: pattern records, the pattern store (Qdrant) and the retriever."""
