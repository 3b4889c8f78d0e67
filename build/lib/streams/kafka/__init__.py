"""Kafka plumbing shared by worker and client: security settings, topics, wire encoding."""
