"""Process tuning for the worker: the C allocator's arenas and trimming, and a memory tracer."""
