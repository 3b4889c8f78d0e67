"""The agent side: the steering client and session, system-message composition, the call gate;
the frameworks' adapters in `streams.agent.adapters`."""
