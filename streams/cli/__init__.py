"""The command line, `rb-streams`. `entry` is the console script (what a client-only install
can run); `main` holds the parser and dispatch, and each command group has a module of its own
(`worker`, `replay`, `cost`, `patterns`, `local`: demo, simulate and kafka, `tenants`,
`deadletters`, `experiment`, `models`); `common` is what they share."""
