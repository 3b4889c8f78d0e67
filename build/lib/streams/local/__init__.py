"""The local harness: demo, local broker control, local worker process, synthetic trajectories."""
