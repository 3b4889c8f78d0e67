"""The agent frameworks' adapters over the steering client: LangChain middleware, the OpenAI
Agents SDK, the Claude Agent SDK's hooks, OpenTelemetry spans. Each imports its framework."""
