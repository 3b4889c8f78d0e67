"""The worker: Faust app, per-run ordering and acks, metrics, HTTP views and their auth."""
