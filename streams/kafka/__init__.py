"""Kafka plumbing a client-only install may import: the client's settings, security, decision
signatures, the broker probe, wire encoding. The worker's topics are in `streams.admin`."""
