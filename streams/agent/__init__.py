"""The agent side: steering client, session, system-message composition, LangChain middleware, Claude Agent SDK hooks."""
