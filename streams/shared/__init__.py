"""Below the core, shared with the agent side: the wire contract, the quoting of untrusted text,
taint values and the call gate's policy, escaping for log lines. Standard library only."""
