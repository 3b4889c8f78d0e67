"""The command line, `rb-streams`: `entry` is the console script (what a client-only install
can run), `main` the parser and the commands, `cost` the cost command's tables."""
