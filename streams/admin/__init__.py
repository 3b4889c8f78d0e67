"""The worker's and operators' side of the broker: topics, the app id's ownership, tenants and
their quotas, the dead-letter topic. Needs the worker's settings (not for a client-only install)."""
